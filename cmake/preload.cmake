# libfastclock-preload.so: the LD_PRELOAD shim (src/preload.c on top of the
# library's objects), and what `fastclock run` needs to find it.
add_library(fastclock_preload SHARED ${CMAKE_SOURCE_DIR}/src/preload.c $<TARGET_OBJECTS:fastclock_obj>)
set_target_properties(fastclock_preload PROPERTIES OUTPUT_NAME fastclock-preload)
target_include_directories(fastclock_preload PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include)
target_compile_options(fastclock_preload PRIVATE ${FASTCLOCK_WARNINGS} -fvisibility=hidden)
target_link_libraries(fastclock_preload PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
# -z now: no lazy binding, so no resolver runs inside a signal handler.
# -z nodelete: a dlclose would leave other objects' GOTs pointing at us.
# -Bsymbolic-functions: the library's own calls (fastclock_mono_ns from the
#   mode decision, ...) stay inside it.
# --wrap: any reference to an interposed name inside the library goes to
#   the kernel (src/preload.c __wrap_*), never back into the shim.
target_link_options(fastclock_preload PRIVATE
  -Wl,-z,now -Wl,-z,nodelete -Wl,--no-undefined -Wl,-Bsymbolic-functions
  -Wl,--wrap=clock_gettime -Wl,--wrap=gettimeofday -Wl,--wrap=time -Wl,--wrap=timespec_get)
install(TARGETS fastclock_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT shim)

# `fastclock run` looks for the shim at <its dir>/<bindir-to-libdir>/, which
# works both in the build tree (bin/ and lib/) and once installed.
if(TARGET fastclock_cli)
  file(RELATIVE_PATH FASTCLOCK_BIN_TO_LIB ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  target_compile_definitions(fastclock_cli PRIVATE FASTCLOCK_BIN_TO_LIB="${FASTCLOCK_BIN_TO_LIB}")
  add_dependencies(fastclock_cli fastclock_preload)
endif()

# The shim's benchmark program (driven by bench/shim/run.py, `make bench-shim`).
add_executable(fastclock-bench-shim ${CMAKE_SOURCE_DIR}/bench/shim/shim_bench.c)
target_link_libraries(fastclock-bench-shim PRIVATE ${CMAKE_DL_LIBS})
target_compile_options(fastclock-bench-shim PRIVATE ${FASTCLOCK_WARNINGS})
add_dependencies(fastclock-bench-shim fastclock_preload)
