# Writes gpuprov.1 and the completion scripts by running the gpuprov just built (core/CMakeLists.txt).
# Inputs: GPUPROV (the executable), MAN, BASH, ZSH, FISH (the files to write).
foreach(pair "MAN;__man" "BASH;completion;bash" "ZSH;completion;zsh" "FISH;completion;fish")
  list(POP_FRONT pair var)
  get_filename_component(dir "${${var}}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  execute_process(COMMAND "${GPUPROV}" ${pair}
                  OUTPUT_FILE "${${var}}.tmp"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${GPUPROV} ${pair} failed (${rc})")
  endif()
  file(RENAME "${${var}}.tmp" "${${var}}")
endforeach()
