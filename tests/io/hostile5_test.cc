// Hostile input, round 5 (issue 69): a file that changes between the read that verified it and
// the read that uses it is refused (FileChanged) before the second read hands out a block; a
// checkpoint's header is judged only after its CRC; an output path that is a FIFO, a device, a
// socket or a directory is refused naming its key, never opened and never replaced.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "sfb/core/error.h"
#include "sfb/core/files.h"
#include "sfb/io/checkpoint.h"
#include "sfb/io/model_file.h"
#include "testing/files.h"

namespace sfb::io {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

std::string changed_error(const std::function<void()>& fn) { return testing::error_of<FileChanged>(fn); }
std::string data_error(const std::function<void()>& fn) { return testing::error_of<DataError>(fn); }
std::string arg_error(const std::function<void()>& fn) { return testing::error_of<InvalidArgument>(fn); }

// A sink that only counts the rows it was handed.
std::function<RowSink(const CheckpointInfo&)> counting(int64_t& rows) {
  return [&rows](const CheckpointInfo&) { return [&rows](int64_t, int64_t n, const float*) { rows += n; }; };
}

// Two checkpoints of other shapes and the same byte count (4 x 6 and 6 x 4 floats): what a swap
// between the check and the use looks like (issue 69: rank 0 crashed streaming the second).
TEST(HostileChangedFiles, ACheckpointReplacedAfterItsCheckIsRefusedBeforeAnyBlock) {
  TempDir dir;
  const auto path = dir.file("ck.bin");
  const auto other = dir.file("other.bin");
  write_checkpoint(path, Checkpoint{1, 2, 3, 1, Matrix::Random(4, 6)});
  write_checkpoint(other, Checkpoint{1, 2, 3, 1, Matrix::Random(6, 4)});
  ASSERT_EQ(std::filesystem::file_size(path), std::filesystem::file_size(other));
  FileSeal seal;
  int64_t rows = 0;
  read_checkpoint(path, counting(rows), kRowBlockBytes, &seal);
  EXPECT_EQ(rows, 4);
  EXPECT_FALSE(seal.empty());
  std::filesystem::rename(other, path);  // swapped by rename: another inode
  rows = 0;
  EXPECT_THAT(changed_error([&] { read_checkpoint(path, counting(rows), kRowBlockBytes, &seal); }),
              HasSubstr(path + ": the checkpoint changed after it was verified"));
  EXPECT_EQ(rows, 0) << "no block of the other file was handed out";
  EXPECT_THAT(changed_error([&] { check_sealed(path, "checkpoint", seal); }), HasSubstr(path));
}

TEST(HostileChangedFiles, ACheckpointRewrittenInPlaceIsRefused) {
  TempDir dir;
  const auto path = dir.file("ck.bin");
  write_checkpoint(path, Checkpoint{1, 2, 3, 1, Matrix::Random(4, 6)});
  FileSeal seal;
  int64_t rows = 0;
  read_checkpoint(path, counting(rows), kRowBlockBytes, &seal);
  // The same inode, rewritten with a checkpoint of another shape and the same length.
  const Bytes other = encode_checkpoint(Checkpoint{1, 2, 3, 1, Matrix::Random(6, 4)});
  testing::write_raw(path, std::string(reinterpret_cast<const char*>(other.data()), other.size()));
  rows = 0;
  EXPECT_THAT(changed_error([&] { read_checkpoint(path, counting(rows), kRowBlockBytes, &seal); }),
              HasSubstr("changed after it was verified"));
  EXPECT_EQ(rows, 0);
  // The file untouched since its check reads as before.
  write_checkpoint(path, Checkpoint{1, 2, 3, 1, Matrix::Random(4, 6)});
  FileSeal fresh;
  read_checkpoint(path, counting(rows), kRowBlockBytes, &fresh);
  rows = 0;
  read_checkpoint(path, counting(rows), kRowBlockBytes, &fresh);
  EXPECT_EQ(rows, 4);
  check_sealed(path, "checkpoint", fresh);
}

TEST(HostileChangedFiles, AModelFileReplacedAfterItsCheckIsRefusedBeforeAnyBlock) {
  TempDir dir;
  const auto path = dir.file("init.bin");
  const auto other = dir.file("other.bin");
  write_model(path, Matrix::Random(4, 6));
  write_model(other, Matrix::Random(6, 4));
  FileSeal seal;
  int64_t rows = 0;
  const auto open = [&rows](int64_t, int64_t) -> RowSink {
    return [&rows](int64_t, int64_t n, const float*) { rows += n; };
  };
  read_model(path, open, nullptr, &seal);
  EXPECT_EQ(rows, 4);
  std::filesystem::rename(other, path);
  rows = 0;
  EXPECT_THAT(changed_error([&] { read_model(path, open, nullptr, &seal); }),
              HasSubstr(path + ": the model file changed after it was verified"));
  EXPECT_EQ(rows, 0);
}

// A flipped bit in a header field (the clock) was reported by that field ("the checkpoint is at
// clock 296 ..."); it is corruption, and the CRC says so before any field is judged.
TEST(HostileChangedFiles, ACheckpointHeaderWithAFlippedBitIsReportedAsCorrupt) {
  TempDir dir;
  const auto path = dir.file("ck.bin");
  write_checkpoint(path, Checkpoint{1, 2, 40, 1, Matrix::Random(3, 5)});
  std::string bytes = testing::read_raw(path);
  bytes[32 + 6] ^= 0x40;  // clock's bit 54: past 2^53, a structural check fails first
  testing::write_raw(path, bytes);
  EXPECT_THAT(data_error([&] { read_checkpoint(path); }), HasSubstr(path + ": checksum mismatch"));
  EXPECT_THAT(data_error([&] { read_checkpoint(path); }), HasSubstr("header cannot be trusted"));
  bytes[32 + 6] ^= 0x40;
  bytes[48] ^= 0x01;  // rows 3 -> 2: the length no longer fits the shape
  testing::write_raw(path, bytes);
  EXPECT_THAT(data_error([&] { read_checkpoint(path); }), HasSubstr("the checkpoint is corrupt"));
  const auto in_memory = [&] { decode_checkpoint(std::as_bytes(std::span(bytes.data(), bytes.size())), "ck"); };
  EXPECT_THAT(data_error(in_memory), HasSubstr("checksum mismatch"));
}

// A model file's CRC covers its data, not its header: a header that does not fit the data whose CRC
// holds is the corrupt part, and says so; with the data damaged too the file is corrupt.
TEST(HostileChangedFiles, AModelFileHeaderWithAFlippedBitIsReportedAsCorrupt) {
  TempDir dir;
  const auto path = dir.file("m.bin");
  write_model(path, Matrix::Random(3, 5));
  std::string bytes = testing::read_raw(path);
  bytes[16] ^= 0x01;  // rows 3 -> 2
  testing::write_raw(path, bytes);
  EXPECT_THAT(data_error([&] { read_model(path); }),
              HasSubstr(path + ": the header is corrupt: the data's CRC holds but the header does not fit it"));
  bytes[kModelHeaderBytes + 1] ^= 0x10;  // and a bit of the data
  testing::write_raw(path, bytes);
  EXPECT_THAT(data_error([&] { read_model(path); }), HasSubstr(path + ": checksum mismatch"));
}

// Every kind of path that is not a regular file, in a scratch directory.
struct Specials {
  TempDir dir;
  std::string fifo = dir.file("fifo"), sub = dir.file("sub"), sock = dir.file("sock"), dev = dir.file("null");
  bool have_dev = false;
  int sock_fd = -1;
  Specials() {
    EXPECT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    std::filesystem::create_directories(sub);
    sock_fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, sock.c_str(), sizeof(a.sun_path) - 1);
    EXPECT_EQ(::bind(sock_fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    have_dev = ::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;  // /dev/null's numbers; root only
  }
  ~Specials() { ::close(sock_fd); }
};

TEST(HostileOutputTargets, AFifoDeviceSocketOrDirectoryIsRefusedNamingTheKeyAndKept) {
  Specials s;
  EXPECT_THAT(arg_error([&] { prepare_output_file(s.fifo, "output.trace"); }),
              HasSubstr("output.trace: " + s.fifo + " is a FIFO"));
  EXPECT_THAT(arg_error([&] { prepare_output_file(s.sock, "output.metrics"); }), HasSubstr("is a socket"));
  EXPECT_THAT(arg_error([&] { prepare_output_file(s.sub, "output.summary"); }), HasSubstr("output.summary"));
  EXPECT_THAT(arg_error([&] { check_output_is_regular(s.sub, "output.summary"); }), HasSubstr("is a directory"));
  if (s.have_dev) {
    EXPECT_THAT(arg_error([&] { prepare_output_file(s.dev, "output.model"); }),
                HasSubstr("output.model: " + s.dev + " is a character device"));
    // A link to a device is judged by the device.
    std::filesystem::create_symlink(s.dev, s.dir.file("link"));
    EXPECT_THAT(arg_error([&] { prepare_output_file(s.dir.file("link"), "--out"); }), HasSubstr("character device"));
  }
  // A regular file and a new name are outputs.
  testing::write_raw(s.dir.file("old.json"), "{}");
  prepare_output_file(s.dir.file("old.json"), "output.summary");
  prepare_output_file(s.dir.file("new.json"), "output.summary");
}

TEST(HostileOutputTargets, AWriteIsRenamedOverARegularFileOnly) {
  Specials s;
  const std::string text = "x";
  EXPECT_THAT(testing::error_of<Error>([&] { write_file_atomic(s.fifo, text); }), HasSubstr("is a FIFO"));
  EXPECT_TRUE(std::filesystem::is_fifo(s.fifo)) << "the FIFO was replaced";
  if (s.have_dev) {
    EXPECT_THAT(testing::error_of<Error>([&] { write_model(s.dev, Matrix::Zero(2, 2)); }),
                HasSubstr("is a character device"));
    EXPECT_TRUE(std::filesystem::is_character_file(s.dev)) << "the device node was replaced";
  }
  for (const auto& e : std::filesystem::directory_iterator(s.dir.path()))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path() << " left behind";
  write_file_atomic(s.dir.file("plain"), text);
  EXPECT_EQ(testing::read_raw(s.dir.file("plain")), text);
}

// The readers refuse what is not a regular file without blocking on it (a FIFO opened for reading
// waits for a writer).
TEST(HostileOutputTargets, AReaderGivenAFifoOrDeviceRefusesWithoutBlocking) {
  Specials s;
  EXPECT_THAT(data_error([&] { read_checkpoint(s.fifo); }), HasSubstr("cannot read checkpoint: a FIFO"));
  if (s.have_dev) EXPECT_THAT(data_error([&] { read_model(s.dev); }), HasSubstr("a character device"));
}

}  // namespace
}  // namespace sfb::io
