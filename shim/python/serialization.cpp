// torch._C.PyTorchFileWriter / PyTorchFileReader: what torch.save and torch.load use for their
// default (zip) format, on serialize/'s archive. Files written here load in upstream torch and
// the other way round; a truncated or corrupt file is refused by name, never half-read.
#include <fcntl.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "archive.h"
#include "python_shim.h"

namespace tn::py {

namespace {

namespace pyb = pybind11;
using serialize::ArchiveError;
using serialize::ArchiveReader;
using serialize::ArchiveWriter;

// upstream names the archive folder after the file: "dir/model.pt" -> "model".
std::string archive_name_for(const std::string& path) {
  size_t start = path.find_last_of("/\\");
  start = start == std::string::npos ? 0 : start + 1;
  size_t dot = path.find_last_of('.');
  return path.substr(start, dot == std::string::npos || dot < start ? std::string::npos : dot - start);
}

class FileWriter {
 public:
  explicit FileWriter(const pyb::object& target) {
    if (pyb::isinstance<pyb::str>(target)) {
      std::string path = target.cast<std::string>();
      file_ = std::fopen(path.c_str(), "wb");
      if (!file_) throw ArchiveError("File " + path + " cannot be opened.");
      writer_ = std::make_unique<ArchiveWriter>(
          archive_name_for(path), [this, path](const void* data, size_t size) {
            if (std::fwrite(data, 1, size, file_) != size)
              throw ArchiveError("writing " + path + " failed: " + std::strerror(errno));
          });
    } else {
      if (!pyb::hasattr(target, "write"))
        throw pyb::type_error("PyTorchFileWriter needs a file name or an object with a write method");
      buffer_ = target;
      writer_ = std::make_unique<ArchiveWriter>("archive", [this](const void* data, size_t size) {
        buffer_.attr("write")(pyb::memoryview::from_memory(data, pyb::ssize_t(size)));
      });
    }
  }
  ~FileWriter() {
    try {
      finish();  // as upstream's destructor: an unfinished archive is finished, not left without a directory
    } catch (const std::exception&) {
      // destructors must not throw; write_end_of_file reports the same error when called
    }
    if (file_) std::fclose(file_);
  }
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void write_bytes(const std::string& name, const pyb::bytes& data, size_t size) {
    std::string_view view = data;
    if (size > view.size())
      throw pyb::value_error("write_record: size " + std::to_string(size) + " exceeds the " +
                             std::to_string(view.size()) + " bytes given");
    writer_->write_record(name, view.data(), size);
  }
  // torch.save passes storage.data_ptr() as an int, as upstream's binding takes it: the caller
  // vouches for `size` readable bytes there.
  void write_pointer(const std::string& name, uintptr_t address, size_t size) {
    if (address == 0 && size > 0) throw pyb::value_error("write_record: null data pointer for " + name);
    writer_->write_record(name, reinterpret_cast<const void*>(address), size);
  }
  void finish() {
    if (writer_->finished()) return;
    writer_->finish();
    if (file_ && std::fflush(file_) != 0)
      throw ArchiveError(std::string("flushing the archive failed: ") + std::strerror(errno));
  }
  ArchiveWriter& writer() { return *writer_; }

 private:
  std::FILE* file_ = nullptr;
  pyb::object buffer_;
  std::unique_ptr<ArchiveWriter> writer_;
};

class FileReader {
 public:
  explicit FileReader(const pyb::object& source) {
    if (pyb::isinstance<pyb::str>(source)) {
      std::string path = source.cast<std::string>();
      int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        throw ArchiveError("open file failed because of errno " + std::to_string(errno) +
                           " on fopen: " + std::strerror(errno) + ", file path: " + path);
      auto owned = std::shared_ptr<int>(new int(fd), [](int* f) {
        ::close(*f);
        delete f;
      });
      struct stat info {};
      if (fstat(fd, &info) != 0) throw ArchiveError("cannot stat " + path + ": " + std::strerror(errno));
      reader_ = std::make_unique<ArchiveReader>(
          [owned](uint64_t offset, void* into, size_t size) {
            size_t done = 0;
            while (done < size) {
              ssize_t n = ::pread(*owned, static_cast<char*>(into) + done, size - done, off_t(offset + done));
              if (n < 0 && errno == EINTR) continue;
              if (n <= 0) break;
              done += size_t(n);
            }
            return done;
          },
          uint64_t(info.st_size));
    } else {
      for (const char* method : {"seek", "tell", "read"})
        if (!pyb::hasattr(source, method))
          throw pyb::type_error(
              std::string("PyTorchFileReader needs a file name or a file-like object with ") + method + "()");
      pyb::object buffer = source;
      buffer.attr("seek")(0, 2);
      auto size = buffer.attr("tell")().cast<uint64_t>();
      reader_ = std::make_unique<ArchiveReader>(
          [buffer](uint64_t offset, void* into, size_t want) {
            pyb::gil_scoped_acquire gil;
            buffer.attr("seek")(offset);
            size_t done = 0;
            while (done < want) {
              pyb::bytes chunk = buffer.attr("read")(want - done);
              std::string_view view = chunk;
              if (view.empty()) break;
              size_t take = std::min(view.size(), want - done);
              std::memcpy(static_cast<char*>(into) + done, view.data(), take);
              done += take;
            }
            return done;
          },
          size);
    }
  }

  pyb::bytes get_record(const std::string& name) {
    std::string data(reader_->record_size(name), '\0');
    {
      pyb::gil_scoped_release released;
      reader_->read_record(name, data.data());
    }
    return pyb::bytes(data);
  }

  // A tensor whose storage holds the record: `numel` elements of `dtype` (torch.load passes the
  // UntypedStorage class and a byte count, which means uint8). Its shape is [0], as upstream's.
  pyb::object get_storage_from_record(const std::string& name, int64_t numel, const pyb::object& dtype) {
    ScalarType type = is_dtype(dtype.ptr()) ? dtype_of(dtype.ptr()) : ScalarType::Byte;
    uint64_t expected = uint64_t(numel) * element_size(type);
    if (numel < 0 || reader_->record_size(name) != expected)
      throw ArchiveError("PytorchStreamReader: record " + name + " holds " +
                         std::to_string(reader_->record_size(name)) + " bytes but " + std::to_string(numel) +
                         " elements of " + upstream_type_name(type) + " were expected");
    auto storage = std::make_shared<Storage>(size_t(expected));
    {
      pyb::gil_scoped_release released;
      reader_->read_record(name, storage->data());
    }
    return pyb::reinterpret_steal<pyb::object>(wrap(Tensor::from_storage(storage, {0}, {1}, 0, type)));
  }

  ArchiveReader& reader() { return *reader_; }

 private:
  std::unique_ptr<ArchiveReader> reader_;
};

}  // namespace

void init_serialization(PyObject* module) {
  auto m = pyb::reinterpret_borrow<pyb::module_>(module);
  pyb::class_<FileWriter>(m, "PyTorchFileWriter")
      .def(pyb::init<const pyb::object&>())
      .def("write_record", &FileWriter::write_bytes)
      .def("write_record", &FileWriter::write_pointer)
      .def("write_end_of_file", &FileWriter::finish)
      .def("set_min_version",
           [](FileWriter& self, uint64_t version) { self.writer().set_min_version(version); })
      .def("archive_name", [](FileWriter& self) { return self.writer().archive_name(); })
      .def("get_all_written_records", [](FileWriter& self) {
        auto names = self.writer().written_records();
        return std::set<std::string>(names.begin(), names.end());
      });
  pyb::class_<FileReader>(m, "PyTorchFileReader")
      .def(pyb::init<const pyb::object&>())
      .def("get_record", &FileReader::get_record)
      .def("get_storage_from_record", &FileReader::get_storage_from_record)
      .def("has_record",
           [](FileReader& self, const std::string& name) { return self.reader().has_record(name); })
      .def("get_all_records", [](FileReader& self) { return self.reader().records(); });
}

}  // namespace tn::py
