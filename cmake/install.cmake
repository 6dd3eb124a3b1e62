# `cmake --install`: the public headers, libfabric_lib.a and the workload archives, a CMake
# package (find_package(fabric [COMPONENTS kv moe weights]) -> fabric::fabric, fabric::kv,
# fabric::moe, fabric::weights) and pkg-config files (fabric-lib, fabric-lib-kv, -moe, -weights).
# Not under pip: the wheel carries only the Python module.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fabric DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The workloads sit on the public API (docs/kv.md, docs/moe.md, docs/weights.md): one export set
# with the library, so fabric::kv's link to fabric::fabric resolves in an installed tree.
set_target_properties(fabric_kv PROPERTIES EXPORT_NAME kv)
set_target_properties(fabric_moe PROPERTIES EXPORT_NAME moe)
set_target_properties(fabric_weights PROPERTIES EXPORT_NAME weights)
install(TARGETS fabric fabric_kv fabric_moe fabric_weights EXPORT fabricTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(FABRIC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fabric)
# The archive's private dependencies (libfabric, ibverbs, hwloc, fmt, spdlog,
# zlib, dl) are exported as link-only dependencies of fabric::fabric; fabricConfig
# finds them before it loads the targets.
install(EXPORT fabricTargets NAMESPACE fabric:: DESTINATION ${FABRIC_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/fabricConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fabricConfig.cmake INSTALL_DESTINATION ${FABRIC_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fabricConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fabricConfig.cmake ${PROJECT_BINARY_DIR}/fabricConfigVersion.cmake
  DESTINATION ${FABRIC_CMAKE_DIR})

# pkg-config: relative to the .pc file, so `cmake --install --prefix` anywhere works.
list(TRANSFORM CMAKE_DL_LIBS PREPEND -l OUTPUT_VARIABLE FABRIC_PC_DL)
list(JOIN FABRIC_PC_DL " " FABRIC_PC_DL)
file(RELATIVE_PATH FABRIC_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
string(REGEX REPLACE "/$" "" FABRIC_PC_TO_PREFIX "${FABRIC_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/fabric-lib.pc.in ${PROJECT_BINARY_DIR}/fabric-lib.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fabric-lib.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# One per workload: its archive before fabric-lib's (pkg-config lists Requires' Libs after).
foreach(_wl IN ITEMS "kv;fabric_kv;" "moe;fabric_moe;-lrt" "weights;fabric_weights;")
  list(GET _wl 0 FABRIC_PC_WORKLOAD)
  list(GET _wl 1 FABRIC_PC_ARCHIVE)
  list(GET _wl 2 FABRIC_PC_EXTRA)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/fabric-lib-workload.pc.in
                 ${PROJECT_BINARY_DIR}/fabric-lib-${FABRIC_PC_WORKLOAD}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/fabric-lib-${FABRIC_PC_WORKLOAD}.pc
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()
