#include "text_table.h"

#include <gtest/gtest.h>

namespace gpuprov {
namespace {

TEST(AlignedColumns, PadsEachColumnToItsWidestCellAndCutsTrailingBlanks) {
  EXPECT_EQ(AlignedColumns(
                {{"NAME", "CLOUD", "NOTE"}, {"a", "digitalocean", ""}, {"long-name", "aws", "x"}}),
            "NAME       CLOUD         NOTE\n"
            "a          digitalocean\n"
            "long-name  aws           x\n");
  EXPECT_EQ(AlignedColumns({}), "");
}

}  // namespace
}  // namespace gpuprov
