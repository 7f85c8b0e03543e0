# Debian packages, one per install component (`cpack -G DEB` in the build
# directory, or `cmake --build build --target package`).
#
#   libspora             libspora.so.<major>                    (the core)
#   libspora-dev         headers, libspora.so, CMake package, spora.pc, plugin template
#   spora-tools          the `spora` command and the conformance cases
#   spora-plugin-<name>  one per plugin built with spora_add_plugin (cpu, sim,
#                        and every GPU/NPU/collective plugin once it exists):
#                        its component is spora-plugin-<name>, so a new plugin
#                        directory gets its own package without edits here
#   python3-spora        the Python package, when frontends/python installs
#                        into that component (see below)
#
# Dependencies between them are exact (= version): they are built together.
# Dependencies on Debian's libraries (libdnnl, libspdlog, libstdc++...) come
# from dpkg-shlibdeps; a plugin's libraries that no Debian package owns
# (CUDA in /usr/local/cuda, ROCm in /opt/rocm, driver stubs) are named in
# its description instead and never stop the build (SporaCPackPlugins.cmake).
set(SPORA_PACKAGE_MAINTAINER "Spora developers <spora@localhost>" CACHE STRING
  "Maintainer field of the Debian packages")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spora)
set(CPACK_PACKAGE_VENDOR Spora)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${SPORA_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps must see libspora.so.<major> (not yet in any installed
# package) to resolve what links it; CPack passes --ignore-missing-info, and
# the exact dependency on the libspora package is added below.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/${CMAKE_INSTALL_LIBDIR})
# libspora ships a shlibs file, so packages built elsewhere against it get
# "libspora (>= version)": within a major the C API only grows.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)

# python3-spora: frontends/python installs the package into the component
# python3-spora (lib/python3/dist-packages/spora, _C's RUNPATH pointing at
# the package's libdir) in a plain CMake build, and into the component
# "python" (wheel layout, skipped below) under scikit-build-core.

get_cmake_property(_spora_components COMPONENTS)
set(CPACK_COMPONENTS_ALL ${_spora_components})
set(_spora_plugin_files "")
foreach(comp IN LISTS _spora_components)
  string(TOUPPER "${comp}" C)
  set(CPACK_DEBIAN_${C}_PACKAGE_NAME ${comp})
  if(comp STREQUAL "libspora")
    string(CONCAT CPACK_COMPONENT_${C}_DESCRIPTION "Spora deep-learning framework: core library\n"
      "libspora.so: the IR, op registry, autodiff, optimizer and scheduler behind\n"
      "Spora's stable C API. Device and collective backends are plugins,\n"
      "packaged separately (spora-plugin-*).")
    set(CPACK_DEBIAN_${C}_PACKAGE_SECTION libs)
    set(CPACK_DEBIAN_${C}_PACKAGE_RECOMMENDS spora-plugin-cpu)
  elseif(comp STREQUAL "libspora-dev")
    string(CONCAT CPACK_COMPONENT_${C}_DESCRIPTION "Spora deep-learning framework: development files\n"
      "Headers of the C API (spora/spora.h, spora/spora.hpp) and the plugin API\n"
      "(spora/plugin.h), the CMake package (find_package(Spora),\n"
      "spora_add_plugin), spora.pc for pkg-config, and the device plugin template.")
    set(CPACK_COMPONENT_${C}_DEPENDS libspora)
    set(CPACK_DEBIAN_${C}_PACKAGE_SECTION libdevel)
  elseif(comp STREQUAL "spora-tools")
    string(CONCAT CPACK_COMPONENT_${C}_DESCRIPTION "Spora deep-learning framework: command-line tools\n"
      "The spora command: list devices and plugins, certify a plugin.")
    set(CPACK_COMPONENT_${C}_DEPENDS libspora)
    # plugin check compares a plugin against the cpu plugin.
    set(CPACK_DEBIAN_${C}_PACKAGE_RECOMMENDS spora-plugin-cpu)
    set(CPACK_DEBIAN_${C}_PACKAGE_SECTION utils)
  elseif(comp MATCHES "^spora-plugin-(.+)$")
    string(CONCAT CPACK_COMPONENT_${C}_DESCRIPTION "Spora deep-learning framework: '${CMAKE_MATCH_1}' plugin\n"
      "The '${CMAKE_MATCH_1}' backend of Spora, loaded by libspora at run time\n"
      "from its plugin directory.")
    set(CPACK_COMPONENT_${C}_DEPENDS libspora)
    # The built file, for SporaCPackPlugins.cmake (vendor libraries outside
    # Debian's packages); spora_add_plugin names it spora-<kind>-<name>.
    foreach(kind device collective)
      if(TARGET spora-${kind}-${CMAKE_MATCH_1})
        string(APPEND _spora_plugin_files
          "set(CPACK_SPORA_PLUGIN_FILE_${comp} \"$<TARGET_FILE:spora-${kind}-${CMAKE_MATCH_1}>\")\n")
      endif()
    endforeach()
  elseif(comp STREQUAL "python")
    # The wheel's component (`pip install .` through scikit-build-core, which
    # lays the package out for site-packages with libspora inside it): not a
    # Debian package. python3-spora is the Debian one (see above).
    message(STATUS "packaging: component 'python' is the wheel's (pip install .); no Debian package from it")
    list(REMOVE_ITEM CPACK_COMPONENTS_ALL ${comp})
    list(APPEND SPORA_WHEEL_ONLY_COMPONENTS ${comp})
  elseif(comp STREQUAL "python3-spora")
    string(CONCAT CPACK_COMPONENT_${C}_DESCRIPTION "Spora deep-learning framework: Python package\n"
      "import spora: tensors and numpy/DLPack interchange, every Spora op, autodiff\n"
      "(grad, value_and_grad), @spora.jit graph mode, spora.nn layers and losses,\n"
      "optimizers, spora.train.Model, checkpoints and model export.")
    # The cpu plugin: without any device plugin `import spora` works but
    # nothing can run.
    set(CPACK_COMPONENT_${C}_DEPENDS libspora spora-plugin-cpu)
    # spora._C is built for one CPython minor version (no stable ABI).
    if(NOT SPORA_PYTHON_ABI_VERSION MATCHES "^([0-9]+)\\.([0-9]+)$")
      message(FATAL_ERROR "packaging: python3-spora needs SPORA_PYTHON_ABI_VERSION (set by frontends/python), "
        "got '${SPORA_PYTHON_ABI_VERSION}'")
    endif()
    math(EXPR _spora_py_next "${CMAKE_MATCH_2} + 1")
    set(CPACK_DEBIAN_${C}_PACKAGE_DEPENDS
      "python3 (>= ${SPORA_PYTHON_ABI_VERSION}), python3 (<< ${CMAKE_MATCH_1}.${_spora_py_next}), python3-numpy")
    set(CPACK_DEBIAN_${C}_PACKAGE_SECTION python)
  else()
    # An install() rule without COMPONENT lands in "Unspecified". Warn and
    # leave it out rather than break the configure; the package test fails
    # while SPORA_UNPACKAGED_COMPONENTS is not empty.
    message(WARNING "packaging: install component '${comp}' has no Debian package; give its install() rule "
      "COMPONENT libspora, libspora-dev, spora-tools, python3-spora or spora-plugin-<name> "
      "(see packaging/SporaPackaging.cmake)")
    list(REMOVE_ITEM CPACK_COMPONENTS_ALL ${comp})
    list(APPEND SPORA_UNPACKAGED_COMPONENTS ${comp})
  endif()
endforeach()
# Plugins linking libraries no Debian package owns (CUDA, ROCm...): see
# SporaCPackPlugins.cmake, which cpack runs before building the packages.
file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/packaging/spora-plugin-files.cmake CONTENT "${_spora_plugin_files}")
set(CPACK_SPORA_PLUGIN_FILES_SCRIPT ${PROJECT_BINARY_DIR}/packaging/spora-plugin-files.cmake)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_CURRENT_LIST_DIR}/SporaCPackPlugins.cmake)
# Recorded in CPackConfig.cmake for tests/integration/sdk.
set(CPACK_SPORA_UNPACKAGED_COMPONENTS "${SPORA_UNPACKAGED_COMPONENTS}")
set(CPACK_SPORA_WHEEL_ONLY_COMPONENTS "${SPORA_WHEEL_ONLY_COMPONENTS}")

include(CPack)
