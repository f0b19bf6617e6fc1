#===- DSSingleTorch.cmake - Refuse a second LibTorch on the link line ------===#
#
# ds_check_single_torch(<torch lib dir> ITEMS <link items...>
#                       SYSTEM_DIRS <dirs...>)
# Fails configuration, naming the file, when a c10/torch library of the link
# items (files, imported targets and their link interfaces, bare names) lies
# outside <torch lib dir>, or when a development copy of LibTorch (libc10.so,
# libtorch.so, libtorch_cpu.so) is on one of SYSTEM_DIRS, where the linker
# would find it for a bare -lc10. Two copies of c10 in one process abort at
# start-up (a second DispatchKeySet registry). Used by DSTorch.cmake; tested by
# test/cmake/single-torch.cmake.
#
#===----------------------------------------------------------------------===#

function(_ds_refuse_second_torch file torch_lib_dir)
  message(FATAL_ERROR "${file} would be linked next to the torch in "
    "${torch_lib_dir}: two LibTorch copies abort at start-up. Remove Debian's "
    "LibTorch (apt-get remove libtorch-dev python3-torch) or point "
    "-DDS_PYTHON / -DTorch_DIR at the torch that owns this library.")
endfunction()

function(ds_check_single_torch torch_lib_dir)
  cmake_parse_arguments(ARG "" "" "ITEMS;SYSTEM_DIRS" ${ARGN})
  get_filename_component(torch_lib_dir "${torch_lib_dir}" REALPATH)
  set(seen)
  set(queue ${ARG_ITEMS})
  while(queue)
    list(POP_FRONT queue item)
    if(item IN_LIST seen OR item MATCHES "^(-|\\$<)")
      continue()
    endif()
    list(APPEND seen ${item})
    set(files)
    if(TARGET ${item})
      get_target_property(type ${item} TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        foreach(prop IMPORTED_LOCATION IMPORTED_LOCATION_RELEASE
                     IMPORTED_LOCATION_NOCONFIG)
          get_target_property(location ${item} ${prop})
          if(location)
            list(APPEND files ${location})
          endif()
        endforeach()
      endif()
      get_target_property(deps ${item} INTERFACE_LINK_LIBRARIES)
      if(deps)
        list(APPEND queue ${deps})
      endif()
    elseif(IS_ABSOLUTE "${item}")
      list(APPEND files ${item})
    elseif(item MATCHES "^(c10|torch)")
      # A bare name: the linker searches the system folders for it.
      foreach(dir ${ARG_SYSTEM_DIRS})
        if(EXISTS "${dir}/lib${item}.so")
          list(APPEND files "${dir}/lib${item}.so")
        endif()
      endforeach()
    endif()
    foreach(file ${files})
      get_filename_component(name "${file}" NAME)
      get_filename_component(dir "${file}" DIRECTORY)
      get_filename_component(dir "${dir}" REALPATH)
      if(name MATCHES "^lib(c10|torch)" AND NOT dir STREQUAL torch_lib_dir)
        _ds_refuse_second_torch("${file}" "${torch_lib_dir}")
      endif()
    endforeach()
  endwhile()
  foreach(dir ${ARG_SYSTEM_DIRS})
    foreach(name c10 torch torch_cpu)
      if(EXISTS "${dir}/lib${name}.so")
        get_filename_component(real "${dir}" REALPATH)
        if(NOT real STREQUAL torch_lib_dir)
          _ds_refuse_second_torch("${dir}/lib${name}.so" "${torch_lib_dir}")
        endif()
      endif()
    endforeach()
  endforeach()
endfunction()
