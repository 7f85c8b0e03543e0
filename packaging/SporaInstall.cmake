# What `cmake --install` lays out beyond the targets' own install rules:
#
#   include/spora/{spora.h,spora.hpp,plugin.h}          libspora-dev
#   include/spora/sdk/plugin_table.h                    libspora-dev
#   lib/libspora.so.<major>[.<minor>.<patch>]           libspora
#   lib/libspora.so                                      libspora-dev
#   lib/spora/plugins/libspora-<kind>-<name>.so         spora-plugin-<name>
#   bin/spora                                            spora-tools
#   lib/cmake/Spora/{SporaConfig,SporaConfigVersion,SporaTargets,
#                    SporaAddPlugin}.cmake, plugin.map   libspora-dev
#   lib/pkgconfig/spora.pc                               libspora-dev
#   share/spora/template/                                libspora-dev
#   share/spora/conformance/cases/*.json                 spora-tools
#
# Everything here is relocatable: the CMake package and spora.pc find the
# prefix from their own location, so the tree works wherever it is unpacked
# (a temporary prefix in the tests, /usr in the Debian packages).
include(CMakePackageConfigHelpers)

set(SPORA_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Spora)

# The plugin ABI version, read from the one place it is defined.
file(STRINGS ${PROJECT_SOURCE_DIR}/plugin-api/include/spora/plugin.h _spora_abi_lines
  REGEX "^#define SPORA_PLUGIN_ABI_(MAJOR|MINOR) [0-9]+")
foreach(line IN LISTS _spora_abi_lines)
  if(line MATCHES "^#define SPORA_PLUGIN_ABI_(MAJOR|MINOR) ([0-9]+)")
    set(SPORA_PLUGIN_ABI_${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
  endif()
endforeach()
if(NOT DEFINED SPORA_PLUGIN_ABI_MAJOR OR NOT DEFINED SPORA_PLUGIN_ABI_MINOR)
  message(FATAL_ERROR "packaging: could not read SPORA_PLUGIN_ABI_MAJOR/MINOR from plugin-api/include/spora/plugin.h")
endif()

# The elementwise op table (ops_elementwise.h/.def) goes beside plugin.h:
# out-of-tree plugins may generate their op lists from it too.
install(FILES ${PROJECT_SOURCE_DIR}/plugin-api/include/spora/plugin.h
  ${PROJECT_SOURCE_DIR}/plugin-api/include/spora/ops_elementwise.h
  ${PROJECT_SOURCE_DIR}/plugin-api/include/spora/ops_elementwise.def
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spora COMPONENT libspora-dev)
# The SDK's header-only helpers for plugins (spora/sdk/plugin_table.h).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/include/spora/sdk
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/spora COMPONENT libspora-dev)

# Imported targets Spora::spora (the C API library) and Spora::plugin_api
# (include directory of spora/plugin.h, for plugins).
install(TARGETS spora_plugin_api EXPORT SporaTargets COMPONENT libspora-dev)
install(EXPORT SporaTargets NAMESPACE Spora:: DESTINATION ${SPORA_CMAKE_INSTALL_DIR} COMPONENT libspora-dev)

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/SporaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/packaging/SporaConfig.cmake
  INSTALL_DESTINATION ${SPORA_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR SPORA_PLUGIN_INSTALL_DIR CMAKE_INSTALL_DATADIR)
# Within a major version the C API only grows (docs/abi-policy.md).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/packaging/SporaConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/packaging/SporaConfig.cmake
  ${PROJECT_BINARY_DIR}/packaging/SporaConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/sdk/cmake/SporaAddPlugin.cmake
  ${PROJECT_SOURCE_DIR}/sdk/cmake/plugin.map
  DESTINATION ${SPORA_CMAKE_INSTALL_DIR} COMPONENT libspora-dev)

# pkg-config: prefix relative to the .pc file's own directory.
set(_spora_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH SPORA_PC_TO_PREFIX ${CMAKE_INSTALL_PREFIX}/${_spora_pc_dir} ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" SPORA_PC_TO_PREFIX "${SPORA_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/spora.pc.in ${PROJECT_BINARY_DIR}/packaging/spora.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/packaging/spora.pc DESTINATION ${_spora_pc_dir} COMPONENT libspora-dev)

# The plugin template vendors copy, and the op cases `spora plugin check` runs.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/template/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/spora/template COMPONENT libspora-dev)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/conformance/cases/
  DESTINATION ${CMAKE_INSTALL_DATADIR}/spora/conformance/cases COMPONENT spora-tools
  FILES_MATCHING PATTERN "*.json")
