# llmk_add_sources(<file>...): adds a component's sources to the llmk library.
#  - a name ending in _avx2.cpp is compiled with AVX2+FMA+F16C, and so is one
#    ending in _avxvnni.cpp or _avxvnni_evex.cpp (its VNNI instructions are
#    inline asm: src/core/simd.hpp),
#  - a name ending in _avx512.cpp with AVX-512 F/BW/VL/DQ (+FMA, F16C),
#  - a name ending in _avx512vnni.cpp with those and AVX-512 VNNI,
#  - a name ending in _avx512vbmi.cpp with those, VNNI and VBMI (vpermb),
#  - a .cu file is added only when the CUDA kernels are built (as C++ for
#    the emulator with LLMK_CUDA=EMU: llmk_emu_source, cmake/LlmkCuda.cmake).
# Nothing else gets ISA flags: the choice between scalar, AVX2 and AVX-512 is
# made at run time (include/llmk/cpu_features.hpp), so one binary runs anywhere.
function(llmk_add_sources)
  foreach(src IN LISTS ARGN)
    get_filename_component(abs ${src} ABSOLUTE)
    if(abs MATCHES "\\.cu$")
      if(NOT LLMK_HAVE_CUDA)
        continue()
      elseif(LLMK_CUDA_EMU)
        llmk_emu_source(abs ${abs} llmk)
      endif()
    elseif(abs MATCHES "_(avx2|avxvnni|avxvnni_evex)\\.cpp$")
      set_source_files_properties(${abs} TARGET_DIRECTORY llmk PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    elseif(abs MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${abs} TARGET_DIRECTORY llmk PROPERTIES
        COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mfma;-mf16c")
    elseif(abs MATCHES "_avx512vnni\\.cpp$")
      set_source_files_properties(${abs} TARGET_DIRECTORY llmk PROPERTIES
        COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mfma;-mf16c")
    elseif(abs MATCHES "_avx512vbmi\\.cpp$")
      set_source_files_properties(${abs} TARGET_DIRECTORY llmk PROPERTIES
        COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512vbmi;-mfma;-mf16c")
    endif()
    target_sources(llmk PRIVATE ${abs})
  endforeach()
endfunction()
