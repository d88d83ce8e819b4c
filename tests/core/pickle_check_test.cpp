// The structural pickle check (core/src/pickle_check.h): every pickle that
// torch and Python write passes; each malformed shape is refused with
// BAD_ARCHIVE and a message naming the opcode.
#include "pickle_check.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "archive.h"
#include "error.h"
#include "torchscript_debug_check.h"

namespace manypy {
namespace {

std::string archive_path(const std::string& name) {
  return std::string(MANYPY_ARCHIVES_DIR) + "/" + name;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

Code check_code(const std::string& bytes, std::string* message = nullptr) {
  try {
    check_pickle(bytes, "test");
    return static_cast<Code>(0);
  } catch (const Error& e) {
    if (message) *message = e.message();
    return e.code();
  }
}

TEST(PickleCheck, AcceptsEveryPickleOfTheSampleTorchScriptArchives) {
  int checked = 0;
  for (const char* name : {"invert_script.pt", "loop_script.pt", "resnet18_script.pt"}) {
    auto archive = Archive::open_file(archive_path(name));
    for (const std::string& record : archive->records()) {
      if (!is_torch_pickle_record(record)) continue;
      EXPECT_NO_THROW(check_pickle(archive->read(record), record)) << name << ": " << record;
      if (is_torch_debug_record(record)) {
        EXPECT_NO_THROW(check_torchscript_debug_record(archive->read(record), record)) << record;
      }
      ++checked;
    }
  }
  EXPECT_GT(checked, 6);
}

TEST(PickleCheck, AcceptsPythonPicklesOfEveryProtocol) {
  // Written by Python's pickle (make_archives.py keeps them beside the
  // archives): protocols 0 to 5, memo, marks, frames, sets, bytes.
  for (int protocol = 0; protocol <= 5; ++protocol) {
    const std::string file = "pickles/protocol" + std::to_string(protocol) + ".pkl";
    std::string bytes = read_file(archive_path(file));
    std::string why;
    EXPECT_EQ(check_code(bytes, &why), static_cast<Code>(0)) << file << ": " << why;
  }
}

TEST(PickleCheck, RefusesMalformedStreams) {
  struct Case {
    const char* what;
    std::string bytes;
    const char* names;
  } cases[] = {
      {"BUILD on an empty stack",
       std::string("\x80\x02"
                   "b.",
                   4),
       "BUILD"},
      {"APPENDS without a mark",
       std::string("]"
                   "K\x01"
                   "e.",
                   5),
       "APPENDS"},
      {"SETITEMS with an odd count", std::string("}(K\x01u.", 6), "SETITEMS"},
      {"APPENDS with no list below the mark",
       std::string("(K\x01"
                   "e]",
                   5),
       "APPENDS"},
      {"a pop below the mark", std::string("K\x01(0.", 5), "POP"},
      {"a memo slot never set", std::string("h\x03.", 3), "BINGET"},
      {"a memo slot out of order (libtorch reserved 25 GB for it)",
       std::string("K\x01r\x62\x68\x5f\x5f.", 8), "LONG_BINPUT"},
      {"an argument cut short",
       std::string("X\x10\x00\x00\x00"
                   "abc",
                   8),
       "BINUNICODE"},
      {"no STOP", std::string("K\x01", 2), "STOP"},
      {"an unknown opcode", std::string("\xff.", 2), "0xff"},
      {"STOP on an empty stack", std::string(".", 1), "STOP"},
      {"a GLOBAL without its newline", std::string("cmodule\nname", 12), "GLOBAL"},
      {"an empty record", std::string(), "STOP"},
  };
  for (const Case& c : cases) {
    std::string why;
    EXPECT_EQ(check_code(c.bytes, &why), Code::kBadArchive) << c.what;
    EXPECT_NE(why.find(c.names), std::string::npos) << c.what << ": " << why;
    EXPECT_NE(why.find("test: malformed pickle"), std::string::npos) << c.what << ": " << why;
  }
}

TEST(TorchScriptDebugCheck, RefusesRecordsOfTheWrongShape) {
  // Well-formed pickles (protocol 2) that libtorch 1.13 indexes without
  // checks: an empty tuple crashed it while it reported a parse error.
  const char* cases[] = {
      "\x80\x02).",                   // ()
      "\x80\x02K\x01\x85.",           // (1,)
      "\x80\x02K\x00K\x00\x86\x85.",  // ((0, 0),)
  };
  for (const char* bytes : cases) {
    std::string record(bytes);
    try {
      check_torchscript_debug_record(record, "test");
      ADD_FAILURE() << "accepted " << ::testing::PrintToString(record);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::kBadArchive);
      EXPECT_NE(e.message().find("malformed TorchScript debug record"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace manypy
