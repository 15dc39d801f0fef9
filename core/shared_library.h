// A shared object opened with dlopen(RTLD_NOW | RTLD_LOCAL): the one place gpuprov loads code at
// run time (drivers, driver_host.h; the remote module, remote.h). Closed when the last copy of
// the handle goes away.
#pragma once

#include <memory>
#include <string>

namespace gpuprov {

class SharedLibrary {
 public:
  /// Opens \a path, resolving every symbol now. Throws Error with the loader's own words
  /// ("file too short", "undefined symbol: ...") when it cannot.
  explicit SharedLibrary(const std::string& path);

  /// The address of \a symbol in this library, or nullptr when it has none.
  void* Find(const char* symbol) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<void> handle_;
};

}  // namespace gpuprov
