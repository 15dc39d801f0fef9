#include "shared_library.h"

#include <dlfcn.h>

#include "error.h"

namespace gpuprov {

SharedLibrary::SharedLibrary(const std::string& path) : path_(path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    throw Error(err != nullptr ? err : "dlopen failed on " + path);
  }
  handle_ = std::shared_ptr<void>(handle, [](void* h) { dlclose(h); });
}

void* SharedLibrary::Find(const char* symbol) const {
  return dlsym(handle_.get(), symbol);
}

}  // namespace gpuprov
