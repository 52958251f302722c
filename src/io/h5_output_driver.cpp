#include "io/h5_output_driver.h"
#include "io/h5_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/fault_injection.h"

namespace pt::io::h5 {

namespace {

// What the file-access property list carries to open(): where to keep the first failure.
struct DriverInfo {
  int* first_errno;
  bool disk_full;  // PARATRAIN_FAULT=disk-full:PATH names this file
};

// One open file. HDF5 sees the H5FD_t (first member) and fills its public fields.
struct OutputFile {
  H5FD_t pub;
  int fd;
  bool writable;
  haddr_t eoa, eof;  // end of the space HDF5 allocated; end of the file
  int* first_errno;
};

OutputFile* of(const H5FD_t* file) { return reinterpret_cast<OutputFile*>(const_cast<H5FD_t*>(file)); }

void keep(OutputFile* f, int err) {
  if (*f->first_errno == 0) *f->first_errno = err;
}
bool failed(const OutputFile* f) { return *f->first_errno != 0; }

H5FD_t* open_file(const char* name, unsigned flags, hid_t fapl, haddr_t) {
  const auto* info = static_cast<const DriverInfo*>(H5Pget_driver_info(fapl));
  if (!info || !info->first_errno) return nullptr;
  int o_flags = (flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY;
  if (flags & H5F_ACC_TRUNC) o_flags |= O_TRUNC;
  if (flags & H5F_ACC_CREAT) o_flags |= O_CREAT;
  if (flags & H5F_ACC_EXCL) o_flags |= O_EXCL;
  const int fd = ::open(name, o_flags | O_CLOEXEC, 0666);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    if (*info->first_errno == 0) *info->first_errno = errno;
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  auto* f = new (std::nothrow) OutputFile{};
  if (!f) {
    ::close(fd);
    return nullptr;
  }
  f->fd = fd;
  f->writable = (flags & H5F_ACC_RDWR) != 0;
  f->eof = static_cast<haddr_t>(st.st_size);
  f->first_errno = info->first_errno;
  if (f->writable && info->disk_full) {
    const int err = fault::make_disk_full(fd);
    if (err != 0) keep(f, err);
  }
  return &f->pub;
}

herr_t close_file(H5FD_t* file) {
  OutputFile* f = of(file);
  if (f->writable && !failed(f) && ::fsync(f->fd) != 0) keep(f, errno);
  if (::close(f->fd) != 0 && f->writable) keep(f, errno);  // NFS reports a failed write-back here
  delete f;
  return 0;
}

herr_t query(const H5FD_t*, unsigned long* flags) {
  // As sec2: HDF5 gathers metadata and small raw data into larger writes.
  if (flags)
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA;
  return 0;
}

haddr_t get_eoa(const H5FD_t* file, H5FD_mem_t) { return of(file)->eoa; }

herr_t set_eoa(H5FD_t* file, H5FD_mem_t, haddr_t addr) {
  of(file)->eoa = addr;
  return 0;
}

haddr_t get_eof(const H5FD_t* file, H5FD_mem_t) { return of(file)->eof; }

herr_t get_handle(H5FD_t* file, hid_t, void** handle) {
  *handle = &of(file)->fd;
  return 0;
}

herr_t read(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, void* buf) {
  OutputFile* f = of(file);
  auto* p = static_cast<unsigned char*>(buf);
  while (size > 0) {
    const ssize_t n = ::pread(f->fd, p, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      keep(f, errno);
      return -1;
    }
    if (n == 0) {  // past the end of the file: zeros, as sec2 reads them
      std::memset(p, 0, size);
      break;
    }
    p += n;
    addr += static_cast<haddr_t>(n);
    size -= static_cast<size_t>(n);
  }
  return 0;
}

herr_t write(H5FD_t* file, H5FD_mem_t, hid_t, haddr_t addr, size_t size, const void* buf) {
  OutputFile* f = of(file);
  if (addr + size > f->eof) f->eof = addr + size;
  const auto* p = static_cast<const unsigned char*>(buf);
  while (size > 0 && !failed(f)) {
    const ssize_t n = ::pwrite(f->fd, p, size, static_cast<off_t>(addr));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      keep(f, n < 0 ? errno : EIO);
      break;
    }
    p += n;
    addr += static_cast<haddr_t>(n);
    size -= static_cast<size_t>(n);
  }
  return 0;  // a failure is kept, never returned: see the header
}

herr_t truncate(H5FD_t* file, hid_t, hbool_t) {
  OutputFile* f = of(file);
  if (f->eoa == f->eof) return 0;
  if (!failed(f) && ::ftruncate(f->fd, static_cast<off_t>(f->eoa)) != 0) keep(f, errno);
  f->eof = f->eoa;
  return 0;
}

H5FD_class_t make_class() {
  H5FD_class_t c{};
#ifdef H5FD_CLASS_VERSION  // HDF5 1.13.2 and later
  c.version = H5FD_CLASS_VERSION;
  c.value = 511;  // in the range HDF5 leaves to drivers outside the library
#endif
  c.name = "paratrain-output";
  c.maxaddr = static_cast<haddr_t>(INT64_MAX);  // off_t
  c.fc_degree = H5F_CLOSE_WEAK;
  c.fapl_size = sizeof(DriverInfo);
  c.open = open_file;
  c.close = close_file;
  c.query = query;
  c.get_eoa = get_eoa;
  c.set_eoa = set_eoa;
  c.get_eof = get_eof;
  c.get_handle = get_handle;
  c.read = read;
  c.write = write;
  c.truncate = truncate;
  const H5FD_mem_t map[H5FD_MEM_NTYPES] = H5FD_FLMAP_DICHOTOMY;
  for (int i = 0; i < H5FD_MEM_NTYPES; ++i) c.fl_map[i] = map[i];
  return c;
}

hid_t driver_id() {
  static const H5FD_class_t cls = make_class();
  static const hid_t id = PT_H5_CHECK(H5FDregister(&cls));
  return id;
}

}  // namespace

void use_output_driver(hid_t fapl, int* first_errno, bool disk_full) {
  const DriverInfo info{first_errno, disk_full};
  PT_H5_CHECK(H5Pset_driver(fapl, driver_id(), &info));
}

}  // namespace pt::io::h5
