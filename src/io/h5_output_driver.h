#pragma once
// The HDF5 file driver of the files this program writes (internal to io/; h5::write_file uses
// it). It does what HDF5's default driver (sec2) does — POSIX open, pread, pwrite, ftruncate —
// except that a failed write never reaches HDF5: the first failure's errno is kept, every later
// write and truncation is dropped, and the caller reports the failure once the file is closed.
// Closing syncs the file to disk (fsync); a failure there is kept the same way.
//
// Why: HDF5 1.10 cannot close a file whose flush failed. The failed flush leaves its metadata
// cache in a state every later flush refuses ("slist already enabled"); H5Fclose then frees the
// file but keeps its id, and the library's clean-up at exit closes that id again: a segfault
// (rc 139 in H5F__close_cb), after the error, on a full disk. Seeing no failure, HDF5 closes the
// file normally.
#include <hdf5.h>

namespace pt::io::h5 {

// Makes `fapl` use the driver. The first failed system call of a file opened with it stores its
// errno in *first_errno (which must outlive the file). disk_full: its writes fail with ENOSPC
// (PARATRAIN_FAULT=disk-full:PATH, core/fault_injection.h).
void use_output_driver(hid_t fapl, int* first_errno, bool disk_full = false);

}  // namespace pt::io::h5
