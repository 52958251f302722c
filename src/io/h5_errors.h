#pragma once
// HDF5's own diagnostics, for main(): a failed HDF5 call is one error line naming the file and the
// cause (io/h5_util.h's PT_H5_CHECK); HDF5 prints its error stack as well only when `verbose`
// (--verbose or PARATRAIN_VERBOSE=1).
namespace pt::io {

void set_hdf5_error_printing(bool verbose);

}  // namespace pt::io
