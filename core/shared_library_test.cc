#include "shared_library.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "error.h"

namespace gpuprov {
namespace {

TEST(SharedLibrary, FindsASymbolOfALoadedLibrary) {
  SharedLibrary libc("libc.so.6");
  EXPECT_NE(libc.Find("strlen"), nullptr);
  EXPECT_EQ(libc.Find("gpuprov_no_such_symbol"), nullptr);
  EXPECT_EQ(libc.path(), "libc.so.6");
}

TEST(SharedLibrary, ReportsTheLoadersReasonForAFileThatIsNoLibrary) {
  const std::filesystem::path file =
      std::filesystem::path(::testing::TempDir()) / "shared_library_test_not_elf.so";
  std::ofstream(file) << "not an ELF file";
  try {
    SharedLibrary bad(file.string());
    FAIL() << "loaded a text file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
  std::filesystem::remove(file);
}

TEST(SharedLibrary, ReportsAMissingFile) {
  EXPECT_THROW(SharedLibrary("/nonexistent/libgpuprov-nothing.so"), Error);
}

}  // namespace
}  // namespace gpuprov
