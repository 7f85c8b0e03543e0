# Included by cpack (CPACK_PROJECT_CONFIG_FILE, set in SporaPackaging.cmake)
# before it builds any package: makes every spora-plugin-<name> package
# buildable whatever its plugin links.
#
# A plugin may link a vendor library that no Debian package owns: CUDA's
# libcudart in /usr/local/cuda/lib64, ROCm's in /opt/rocm/lib, a driver stub
# whose soname file (libcuda.so.1) exists only on machines with the driver.
# dpkg-shlibdeps, which fills in the packages' Depends, searches only the
# system directories and the installed file's RUNPATH, and stops cpack with
# "cannot find library" when it cannot find one. So, for each plugin
# package, using the plugin as built (CPACK_SPORA_PLUGIN_FILES_SCRIPT lists
# the files):
#   1. the absolute RUNPATH directories of the built plugin (CMake puts the
#      directories of the libraries it links there) become private search
#      directories of dpkg-shlibdeps (-l), so such libraries are found;
#      found but unowned, they are left out of Depends (cpack passes
#      --ignore-missing-info) and named in the package description;
#   2. a trial dpkg-shlibdeps run on the plugin; if it still fails (a
#      library missing on this machine), that package is built without
#      shlibdeps: Depends is libspora (= version) only, the description
#      names the missing library, and cpack prints a warning.
# Nothing here applies to the other packages; a plugin linking only Debian
# libraries gets exactly what dpkg-shlibdeps says.
if(NOT CPACK_GENERATOR STREQUAL "DEB" OR NOT CPACK_SPORA_PLUGIN_FILES_SCRIPT)
  return()
endif()
if(NOT EXISTS "${CPACK_SPORA_PLUGIN_FILES_SCRIPT}")
  message(FATAL_ERROR "packaging: ${CPACK_SPORA_PLUGIN_FILES_SCRIPT} is missing; build the project before running cpack")
endif()
# set(CPACK_SPORA_PLUGIN_FILE_<component> <built plugin file>) per plugin.
include("${CPACK_SPORA_PLUGIN_FILES_SCRIPT}")
find_program(_spora_readelf NAMES readelf)
find_program(_spora_shlibdeps NAMES dpkg-shlibdeps)
if(NOT _spora_readelf OR NOT _spora_shlibdeps)
  return()  # CPack itself reports a missing dpkg-shlibdeps.
endif()

set(_spora_plugin_comps "")
foreach(comp IN LISTS CPACK_COMPONENTS_ALL)
  if(NOT DEFINED CPACK_SPORA_PLUGIN_FILE_${comp})
    continue()
  endif()
  set(file "${CPACK_SPORA_PLUGIN_FILE_${comp}}")
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "packaging: ${comp}: the plugin ${file} is not built; build the project before running cpack")
  endif()
  list(APPEND _spora_plugin_comps ${comp})
  execute_process(COMMAND ${_spora_readelf} -d --wide "${file}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc ERROR_QUIET)
  set(_spora_dirs_${comp} "")
  if(rc EQUAL 0 AND dyn MATCHES "Library (runpath|rpath): \\[([^]\n]*)\\]")
    string(REPLACE ":" ";" dirs "${CMAKE_MATCH_2}")
    foreach(d IN LISTS dirs)
      if(IS_ABSOLUTE "${d}" AND IS_DIRECTORY "${d}" AND NOT d MATCHES "\\$ORIGIN")
        list(APPEND CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${d}")
        list(APPEND _spora_dirs_${comp} "${d}")
      endif()
    endforeach()
  endif()
  # The libraries found there that dpkg does not know (dpkg-shlibdeps
  # --ignore-missing-info skips them silently).
  set(_spora_unowned_${comp} "")
  string(REGEX MATCHALL "\\(NEEDED\\)[^[]*\\[[^]]+\\]" needed "${dyn}")
  list(TRANSFORM needed REPLACE "^.*\\[(.*)\\]$" "\\1")
  foreach(lib IN LISTS needed)
    foreach(d IN LISTS _spora_dirs_${comp})
      if(EXISTS "${d}/${lib}")
        file(REAL_PATH "${d}/${lib}" real)
        execute_process(COMMAND dpkg-query -S "${d}/${lib}" RESULT_VARIABLE owned1 OUTPUT_QUIET ERROR_QUIET)
        execute_process(COMMAND dpkg-query -S "${real}" RESULT_VARIABLE owned2 OUTPUT_QUIET ERROR_QUIET)
        if(NOT owned1 EQUAL 0 AND NOT owned2 EQUAL 0)
          list(APPEND _spora_unowned_${comp} "${lib} (in ${d})")
        endif()
        break()
      endif()
    endforeach()
  endforeach()
endforeach()
list(REMOVE_DUPLICATES CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS)

set(_spora_l_flags "")
foreach(d IN LISTS CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS)
  list(APPEND _spora_l_flags "-l${d}")
endforeach()
# dpkg-shlibdeps wants a debian/control under its working directory.
set(_spora_wd "${CPACK_TOPLEVEL_DIRECTORY}/spora-shlibdeps-trial")
file(MAKE_DIRECTORY "${_spora_wd}/debian")
file(TOUCH "${_spora_wd}/debian/control")
foreach(comp IN LISTS _spora_plugin_comps)
  string(TOUPPER "${comp}" C)
  set(file "${CPACK_SPORA_PLUGIN_FILE_${comp}}")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C
      ${_spora_shlibdeps} ${_spora_l_flags} --ignore-missing-info -O "${file}"
    WORKING_DIRECTORY "${_spora_wd}" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  set(unowned "${_spora_unowned_${comp}}")
  string(REGEX MATCHALL "cannot find library [^ \n]+" missing "${err}")
  list(TRANSFORM missing REPLACE "^cannot find library " "")
  set(note "")
  if(unowned)
    list(JOIN unowned ", " u)
    string(APPEND note "\nIt also needs ${u},\nwhich no Debian package provides (the vendor's runtime); those are not\n"
      "in Depends.")
  endif()
  if(NOT rc EQUAL 0)
    set(CPACK_DEBIAN_${C}_PACKAGE_SHLIBDEPS OFF)
    if(missing)
      list(JOIN missing ", " m)
    else()
      string(STRIP "${err}" m)
    endif()
    string(APPEND note "\nIt needs ${m}, not found on the machine that built this package (the"
      "\nvendor's driver or runtime); Depends lists only Spora's own packages.")
    message(WARNING "packaging: ${comp}: dpkg-shlibdeps cannot resolve what ${file} links (${m}); "
      "building the package without shlibs Depends")
  endif()
  if(note)
    string(APPEND CPACK_COMPONENT_${C}_DESCRIPTION "${note}")
  endif()
endforeach()
