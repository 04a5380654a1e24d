# docs/ports.md's worked example: the numpy NVFP4 port is bit-exact; with ties rounded up it
# mismatches (exit 1) and kvq identify names the variant.
execute_process(COMMAND ${PYTHON} ${DUMP} --demo ${WORK} RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "kvq_dump.py --demo: ${err}")
endif()
execute_process(COMMAND ${KVQ} verify nvfp4 --inputs ${WORK}/in --outputs ${WORK}/out RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT out MATCHES "BIT-EXACT")
  message(FATAL_ERROR "numpy port should be bit-exact: exit ${status}\n${out}\n${err}")
endif()
execute_process(COMMAND ${PYTHON} ${DUMP} --demo ${WORK} --ties-up RESULT_VARIABLE status OUTPUT_QUIET)
execute_process(COMMAND ${KVQ} verify nvfp4 --inputs ${WORK}/in --outputs ${WORK}/out RESULT_VARIABLE status OUTPUT_VARIABLE out)
if(NOT status EQUAL 1 OR NOT out MATCHES "MISMATCH")
  message(FATAL_ERROR "ties-up numpy port should mismatch: exit ${status}\n${out}")
endif()
execute_process(COMMAND ${KVQ} identify --inputs ${WORK}/in --outputs ${WORK}/out RESULT_VARIABLE status OUTPUT_VARIABLE out)
if(NOT status EQUAL 0 OR NOT out MATCHES "follows nvfp4 except ties round up")
  message(FATAL_ERROR "identify should name the tie rule: exit ${status}\n${out}")
endif()
# The paged store in numpy (kvq_dump.py --paged-demo): bit-exact; with one byte written outside its
# slots it fails (exit 1) though every addressed byte is right.
execute_process(COMMAND ${PYTHON} ${DUMP} --paged-demo ${WORK}/paged RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "kvq_dump.py --paged-demo: ${err}")
endif()
execute_process(COMMAND ${KVQ} verify fp8-e4m3-tensor --inputs ${WORK}/paged/in --outputs ${WORK}/paged/out
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT status EQUAL 0 OR NOT out MATCHES "paged-store fp8-e4m3-tensor: BIT-EXACT")
  message(FATAL_ERROR "numpy paged store should be bit-exact: exit ${status}\n${out}\n${err}")
endif()
execute_process(COMMAND ${PYTHON} ${DUMP} --paged-demo ${WORK}/paged --stray RESULT_VARIABLE status OUTPUT_QUIET)
execute_process(COMMAND ${KVQ} verify fp8-e4m3-tensor --inputs ${WORK}/paged/in --outputs ${WORK}/paged/out
                RESULT_VARIABLE status OUTPUT_VARIABLE out)
if(NOT status EQUAL 1 OR NOT out MATCHES "1 changed outside them")
  message(FATAL_ERROR "a stray write outside the slots should fail: exit ${status}\n${out}")
endif()
# The other kinds in numpy: bit-exact under kvq's model; with the port's bug it mismatches (exit 1)
# and kvq identify names what the port does. Each entry: demo flag; bug flag; kvq verify's
# argument; the line identify must print.
foreach(demo "rope-demo;gptj;rope-quantize;exact: this port follows GPT-J pairs, no FMA\n"
             "rope-demo;computed-cos-sin;rope-quantize;exact: this port follows NeoX pairs, no FMA, cos/sin computed .nearest FP32 to those of the FP32 angle"
             "mla-demo;fp32-tile-scales;mla-cache;exact: this writer follows fp8-e4m3-tensor-rcp\n"
             "requant-demo;drop-k-scale;mla-requant;exact: this requantizer follows drop-k-scale\n"
             "workspace-demo;sglang-rounding;workspace;exact: this workspace rounds fp32-products\\+via-bf16\\+nonsaturating\n")
  list(GET demo 0 flag)
  list(GET demo 1 bug)
  list(GET demo 2 kind)
  list(GET demo 3 named)
  execute_process(COMMAND ${PYTHON} ${DUMP} --${flag} ${WORK}/${flag} RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "kvq_dump.py --${flag}: ${err}")
  endif()
  execute_process(COMMAND ${KVQ} verify ${kind} --inputs ${WORK}/${flag}/in --outputs ${WORK}/${flag}/out
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0 OR NOT out MATCHES "BIT-EXACT")
    message(FATAL_ERROR "numpy ${kind} should be bit-exact: exit ${status}\n${out}\n${err}")
  endif()
  execute_process(COMMAND ${PYTHON} ${DUMP} --${flag} ${WORK}/${flag} --${bug} RESULT_VARIABLE status OUTPUT_QUIET
                  ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "kvq_dump.py --${flag} --${bug}: ${err}")
  endif()
  execute_process(COMMAND ${KVQ} verify ${kind} --inputs ${WORK}/${flag}/in --outputs ${WORK}/${flag}/out
                  RESULT_VARIABLE status OUTPUT_VARIABLE out)
  if(NOT status EQUAL 1 OR NOT out MATCHES "MISMATCH")
    message(FATAL_ERROR "the ${bug} port should mismatch: exit ${status}\n${out}")
  endif()
  execute_process(COMMAND ${KVQ} identify --inputs ${WORK}/${flag}/in --outputs ${WORK}/${flag}/out
                  RESULT_VARIABLE status OUTPUT_VARIABLE out)
  if(NOT status EQUAL 0 OR NOT out MATCHES "${named}")
    message(FATAL_ERROR "identify should name the ${bug} port: exit ${status}\n${out}")
  endif()
endforeach()
