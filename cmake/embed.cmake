# toolcage_embed(OUT FILES): writes a C file with one entry per input file, named by its
# path relative to the source dir (see common/embedded.h). The list of inputs goes through
# a file, so that no shell or list quoting stands between CMake and the generator.
function(toolcage_embed out files)
  set(listfile ${CMAKE_BINARY_DIR}/embed_files.txt)
  string(REPLACE ";" "\n" lines "${files}")
  file(WRITE ${listfile}.tmp "${lines}\n")
  file(COPY_FILE ${listfile}.tmp ${listfile} ONLY_IF_DIFFERENT)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DOUT=${out} -DSRC=${CMAKE_SOURCE_DIR} -DLIST=${listfile}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_gen.cmake
    DEPENDS ${files} ${listfile} ${CMAKE_SOURCE_DIR}/cmake/embed_gen.cmake
    VERBATIM)
endfunction()
