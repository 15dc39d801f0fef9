// Plain-text tables for the terminal: columns as wide as their widest cell.
#pragma once

#include <string>
#include <vector>

namespace gpuprov {

/// \a rows (the first one the header) as lines: each cell padded to its column's widest cell
/// plus two blanks, the last column unpadded, trailing blanks cut.
std::string AlignedColumns(const std::vector<std::vector<std::string>>& rows);

}  // namespace gpuprov
