// Pre-parse checks of .mlir input (see SourceLimits.h).
#include "ir/SourceLimits.h"

#include "llvm/Support/FileSystem.h"

namespace mc {

std::optional<std::string> findExcessNesting(llvm::StringRef text,
                                             unsigned limit) {
  unsigned depth = 0, line = 1;
  size_t lineStart = 0;
  for (size_t i = 0, n = text.size(); i < n; ++i) {
    char c = text[i];
    switch (c) {
    case '\n':
      ++line;
      lineStart = i + 1;
      break;
    case '"': // a string literal: skip to its closing quote
      for (++i; i < n && text[i] != '"'; ++i) {
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n') { // unterminated: the parser reports it
          ++line;
          lineStart = i + 1;
        }
      }
      break;
    case '/': // a comment runs to the end of the line
      if (i + 1 < n && text[i + 1] == '/')
        while (i + 1 < n && text[i + 1] != '\n')
          ++i;
      break;
    case '{':
    case '[':
    case '(':
    case '<':
      if (++depth > limit)
        return "line " + std::to_string(line) + ", column " +
               std::to_string(i - lineStart + 1);
      break;
    case '>':
      if (i > 0 && text[i - 1] == '-') // `->` closes nothing
        break;
      [[fallthrough]];
    case '}':
    case ']':
    case ')':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
  return std::nullopt;
}

std::unique_ptr<llvm::MemoryBuffer> loadMlirSource(const std::string &path,
                                                   std::string *error) {
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  if (path == "-") {
    auto in = llvm::MemoryBuffer::getSTDIN();
    if (!in) {
      *error = "<stdin>: cannot read: " + in.getError().message();
      return nullptr;
    }
    buffer = std::move(*in);
  } else {
    // Checked before the file is opened: a FIFO would block the open and
    // /dev/zero never ends. (ir/ does not link the runtime, whose
    // modelc/fileio.h does the same for the other inputs.)
    llvm::sys::fs::file_status status;
    if (std::error_code ec = llvm::sys::fs::status(path, status)) {
      *error = path + ": cannot open: " + ec.message();
      return nullptr;
    }
    using llvm::sys::fs::file_type;
    if (status.type() != file_type::regular_file) {
      file_type t = status.type();
      *error = path + ": not a regular file (" +
               (t == file_type::directory_file   ? "a directory"
                : t == file_type::fifo_file      ? "a FIFO"
                : t == file_type::character_file ? "a character device"
                : t == file_type::block_file     ? "a block device"
                : t == file_type::socket_file    ? "a socket"
                                                 : "not a regular file") +
               "); modelc reads only regular files";
      return nullptr;
    }
    if (status.getSize() > kMaxMlirFileBytes) {
      *error = path + ": the file has " + std::to_string(status.getSize()) +
               " bytes, more than the limit of " +
               std::to_string(kMaxMlirFileBytes);
      return nullptr;
    }
    auto in = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/true);
    if (!in) {
      *error = path + ": cannot open: " + in.getError().message();
      return nullptr;
    }
    buffer = std::move(*in);
  }
  llvm::StringRef text = buffer->getBuffer();
  bool bytecode = text.starts_with("ML\xefR");
  if (!bytecode) {
    if (auto where = findExcessNesting(text)) {
      *error = (path == "-" ? std::string("<stdin>") : path) +
               ": nesting deeper than " + std::to_string(kMaxMlirNesting) +
               " at " + *where;
      return nullptr;
    }
  }
  return buffer;
}

} // namespace mc
