// SPDX-License-Identifier: Apache-2.0
/**
 * @file reduce.h
 * @brief Element types and reduction operators of the collectives.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hcasim::verbs {

enum class DataType { Float, Double, Int32, Int64 };
enum class ReduceOp { Sum, Min, Max, Prod };

size_t dataTypeSize(DataType t);
const char* dataTypeName(DataType t);   ///< "float", "double", "int32", "int64"
const char* reduceOpName(ReduceOp op);  ///< "sum", "min", "max", "prod"
/** @brief Parses the names above; throws std::invalid_argument. */
DataType parseDataType(const std::string& s);
ReduceOp parseReduceOp(const std::string& s);

/** @brief dst[i] = dst[i] op src[i] for @p count elements. */
void reduceInto(void* dst, const void* src, size_t count, DataType t, ReduceOp op);
/**
 * @brief dst[i] = a[i] op b[i] for @p count elements: one pass where a copy and reduceInto
 * would take two. @p dst may be @p a or @p b.
 */
void reduceTo(void* dst, const void* a, const void* b, size_t count, DataType t, ReduceOp op);

}  // namespace hcasim::verbs
