# kvq check --plugin: the example plug-in passes every port property (exit 0); the broken one
# (ties rounded up) is caught (exit 1) by a named property.
execute_process(COMMAND ${KVQ} check --plugin ${GOOD} --cases 100 RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT out MATCHES "5 passed, 0 failed, 0 skipped")
  message(FATAL_ERROR "example plug-in: exit ${status}\n${out}\n${err}")
endif()
execute_process(COMMAND ${KVQ} check --plugin ${BROKEN} --cases 100 RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 1 OR NOT out MATCHES "FAILED plugin/near-ties-vs-model")
  message(FATAL_ERROR "broken plug-in should be caught: exit ${status}\n${out}\n${err}")
endif()
execute_process(COMMAND ${KVQ} check --plugin /nonexistent/libnothing.so RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT status EQUAL 2 OR NOT err MATCHES "cannot load /nonexistent/libnothing.so")
  message(FATAL_ERROR "a missing plug-in should exit 2 naming it: exit ${status}\n${err}")
endif()
