# NFC tables (and the categories of recently assigned code points) for the tokenizer, generated at build time from the Unicode Character Database
# (Debian package unicode-data, installed by scripts/setup.sh). Included by runtime/CMakeLists.txt.
set(SPARKCTL_UNICODE_DIR /usr/share/unicode CACHE PATH "Unicode Character Database directory")
foreach(f UnicodeData.txt CompositionExclusions.txt DerivedAge.txt)
  if(NOT EXISTS ${SPARKCTL_UNICODE_DIR}/${f})
    message(FATAL_ERROR "tokenizer: ${SPARKCTL_UNICODE_DIR}/${f} not found "
      "(install unicode-data via scripts/setup.sh or set -DSPARKCTL_UNICODE_DIR=...)")
  endif()
endforeach()
add_executable(spk_unicode_tables_gen ${CMAKE_CURRENT_LIST_DIR}/gen/unicode_tables_gen.cpp)
set(SPK_UNICODE_TABLES_CPP ${CMAKE_CURRENT_BINARY_DIR}/tokenizer/unicode_tables_data.cpp)
add_custom_command(OUTPUT ${SPK_UNICODE_TABLES_CPP}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/tokenizer
  COMMAND spk_unicode_tables_gen ${SPARKCTL_UNICODE_DIR}/UnicodeData.txt
    ${SPARKCTL_UNICODE_DIR}/CompositionExclusions.txt ${SPARKCTL_UNICODE_DIR}/DerivedAge.txt
    ${SPK_UNICODE_TABLES_CPP}
  DEPENDS spk_unicode_tables_gen ${SPARKCTL_UNICODE_DIR}/UnicodeData.txt
    ${SPARKCTL_UNICODE_DIR}/CompositionExclusions.txt ${SPARKCTL_UNICODE_DIR}/DerivedAge.txt
  COMMENT "Generating NFC tables from ${SPARKCTL_UNICODE_DIR}" VERBATIM)
target_sources(sparkctl_runtime PRIVATE ${SPK_UNICODE_TABLES_CPP})
