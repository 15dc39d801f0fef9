# find_package(gpuprov-sdk) for third-party drivers: gives gpuprov::sdk (the header-only SDK,
# with gpuprov/testing.hpp for the driver's tests),
# gpuprov::driver_kit (the static driver kit: HTTP client, status table, cancellable waits, ...;
# it needs Poco and yaml-cpp, found here, and libzopfli, linked as -lzopfli) and gpuprov_add_driver().
include(CMakeFindDependencyMacro)
include("${CMAKE_CURRENT_LIST_DIR}/gpuprov-sdk-targets.cmake")
if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/gpuprov-driver-kit-targets.cmake")
  find_dependency(Poco COMPONENTS Foundation Net NetSSL Crypto JSON)
  find_dependency(yaml-cpp)
  include("${CMAKE_CURRENT_LIST_DIR}/gpuprov-driver-kit-targets.cmake")
endif()
function(gpuprov_add_driver name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_library(gpuprov-driver-${name} MODULE ${ARG_SOURCES})
  target_link_libraries(gpuprov-driver-${name} PRIVATE gpuprov::sdk ${ARG_LIBRARIES})
  set_target_properties(gpuprov-driver-${name} PROPERTIES PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(gpuprov-driver-${name} PRIVATE -Wl,--no-undefined)
endfunction()
