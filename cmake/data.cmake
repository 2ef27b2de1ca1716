# The bundled data: the sample capture, the GUI's fonts, the icon. Programs find it at run time relative to
# their own location (core/include/sparge/core/data_dir.h), never at a path fixed at build time:
#   installed:   <prefix>/bin/sparge  ->  <prefix>/share/sparge-studio/
#   build tree:  <build>/cli/sparge   ->  <build>/share/sparge-studio/ (links made here, at configure time)
# SPARGE_DATA_DIR overrides both.

# Source files, each with its name inside share/sparge-studio.
set(SPARGE_SAMPLE_CAPTURE ${PROJECT_SOURCE_DIR}/captures/sample.h5)  # also read by tests
set(SPARGE_DATA_ITEMS
  "${SPARGE_SAMPLE_CAPTURE}|sample.h5"
  "${PROJECT_SOURCE_DIR}/captures/README.md|sample-capture.md"
  "${PROJECT_SOURCE_DIR}/assets/fonts|fonts"
  "${PROJECT_SOURCE_DIR}/assets/icons/sparge-studio.svg|sparge-studio.svg")

set(SPARGE_BUILD_DATA_DIR ${PROJECT_BINARY_DIR}/share/sparge-studio)
file(MAKE_DIRECTORY ${SPARGE_BUILD_DATA_DIR})
foreach(item IN LISTS SPARGE_DATA_ITEMS)
  string(REPLACE "|" ";" pair "${item}")
  list(GET pair 0 source)
  list(GET pair 1 name)
  if(NOT EXISTS ${SPARGE_BUILD_DATA_DIR}/${name})
    file(CREATE_LINK ${source} ${SPARGE_BUILD_DATA_DIR}/${name} SYMBOLIC COPY_ON_ERROR)
  endif()
endforeach()
