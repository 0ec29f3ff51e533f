# The Python interpreter of oracle tests (torch, numpy, tokenizers); see
# scripts/test-venv.sh. Tests read it from $PPOLAB_PYTHON.
set(PPOLAB_PYTHON "/usr/bin/python3" CACHE FILEPATH "Python for oracle tests")

# Every executable of a test labelled `unit` and the ppolab binary
# (scripts/sanitize.sh builds
# this one target: its dependencies build in parallel, where a list of
# --target goals would build one after another).
if(NOT TARGET ppolab_unit_tests)
  add_custom_target(ppolab_unit_tests)
  add_dependencies(ppolab_unit_tests ppolab)  # some unit tests drive the CLI
endif()

# One OpenMP thread per test process: `ctest -j N` already runs N tests on N
# cores, and two tests of two threads each on 2 cores spend most of their
# time at OpenMP barriers waiting for a thread the other test holds (a micro
# study's greedy evaluation: 80 s with 2 threads beside another test, 13 s
# with one). The kernel and model tests, which check the parallel
# partitioning itself, keep every thread: their folders set
# PPOLAB_TEST_OPENMP_THREADS to "all" (the whole study runs on all threads
# in CI too: the micro study of scripts/fresh-machine-check.sh).
set(PPOLAB_TEST_OPENMP_THREADS 1)
function(ppolab_test_openmp_env out)
  if(PPOLAB_TEST_OPENMP_THREADS STREQUAL "all")
    set(${out} "" PARENT_SCOPE)
  else()
    set(${out} "OMP_NUM_THREADS=${PPOLAB_TEST_OPENMP_THREADS}" PARENT_SCOPE)
  endif()
endfunction()

# ppolab_test(NAME SOURCES a.cpp b.cpp LIBS lib1 lib2 LABELS unit|oracle|smoke)
# Every test goes through this helper: one executable per test file group,
# registered with CTest, run from the repository root so fixtures resolve.
function(ppolab_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main ppolab_flags)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)  # support/test_support.h
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  ppolab_test_openmp_env(T_OPENMP)
  if("unit" IN_LIST T_LABELS)
    add_dependencies(ppolab_unit_tests ${name})
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "PPOLAB_SOURCE_DIR=${CMAKE_SOURCE_DIR};PPOLAB_BINARY=$<TARGET_FILE:ppolab>;PPOLAB_PYTHON=${PPOLAB_PYTHON};OMP_WAIT_POLICY=PASSIVE;${T_OPENMP}")
endfunction()
