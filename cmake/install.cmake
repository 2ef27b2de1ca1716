# Install rules: a relocatable tree (move <prefix> anywhere; the programs find their data through their own
# location) and a Debian package (cpack -G DEB, from the build folder).
#   <prefix>/bin/sparge, <prefix>/bin/sparge-studio
#   <prefix>/share/sparge-studio/          sample capture (+ its provenance), fonts, icon
#   <prefix>/share/applications/sparge-studio.desktop
#   <prefix>/share/icons/hicolor/scalable/apps/sparge-studio.svg

set(SPARGE_INSTALL_DATA_DIR ${CMAKE_INSTALL_DATADIR}/sparge-studio)

install(TARGETS sparge RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${SPARGE_SAMPLE_CAPTURE} DESTINATION ${SPARGE_INSTALL_DATA_DIR})
install(FILES ${PROJECT_SOURCE_DIR}/captures/README.md DESTINATION ${SPARGE_INSTALL_DATA_DIR}
        RENAME sample-capture.md)
if(SPARGE_WITH_GUI)
  install(TARGETS sparge-studio RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/assets/fonts DESTINATION ${SPARGE_INSTALL_DATA_DIR})
  install(FILES ${PROJECT_SOURCE_DIR}/assets/icons/sparge-studio.svg DESTINATION ${SPARGE_INSTALL_DATA_DIR})
  install(FILES ${PROJECT_SOURCE_DIR}/assets/icons/sparge-studio.svg
          DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
  install(FILES ${PROJECT_SOURCE_DIR}/assets/sparge-studio.desktop
          DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
endif()

set(CPACK_PACKAGE_NAME sparge-studio)
set(CPACK_PACKAGE_VENDOR "Sparge Studio")
set(CPACK_PACKAGE_CONTACT "Sparge Studio maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "SpargeAttn sparse attention explorer: masks, errors, tuning and timings per head")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "Loads Q/K/V captured from real models (HDF5), runs the SpargeAttn method on a CPU reference engine "
    "and, when built with CUDA, on the GPU, and shows per head the block mask, PV skips, error and kernel "
    "timings. Includes the sparge command line and the sparge-studio desktop application.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# dpkg-shlibdeps finds the Debian packages behind every linked library; the CUDA runtime comes from NVIDIA's
# installer, not a Debian package, so CUDA builds declare no library dependencies.
if(SPARGE_HAVE_CUDA)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS OFF)
else()
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
endif()
set(CPACK_GENERATOR DEB)
include(CPack)
