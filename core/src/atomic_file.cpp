// Atomic exports: an unnamed temporary beside the target (O_TMPFILE), fsync, then link + rename over the
// target with termination signals held back, so that no signal leaves a half-written file or a
// temporary behind. Also the target rules (symbolic links, modes, read-only files, open inputs).
#include "sparge/core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <utility>

#include "sparge/core/error.h"

namespace sparge::core {
namespace {

namespace fs = std::filesystem;

std::string errnoText(int err) {
  return std::strerror(err);
}

// Files open as inputs, by (device, inode); a multiset because one file may be opened twice.
std::mutex& inputsMutex() {
  static std::mutex m;
  return m;
}
std::multiset<std::pair<unsigned long long, unsigned long long>>& openInputs() {
  static std::multiset<std::pair<unsigned long long, unsigned long long>> s;
  return s;
}

bool isOpenInput(const struct stat& st) {
  std::lock_guard lock(inputsMutex());
  return openInputs().count({st.st_dev, st.st_ino}) > 0;
}

// Where the data really goes: the end of a chain of symbolic links (which may not exist yet).
fs::path resolveLinks(const std::string& path, const std::string& what) {
  fs::path p(path);
  for (int depth = 0; depth < 40; ++depth) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) throw Error(what, "cannot read the symbolic link " + p.string() + " (" + ec.message() + ")");
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  throw Error(what, "too many levels of symbolic links — point the link at a file");
}

// The resolved target of an export and what we must preserve about it.
struct Target {
  fs::path file;  // after following symbolic links
  fs::path dir;   // its folder
  bool exists = false;
  mode_t mode = 0;  // permission bits of the existing file
};

// A name longer than the file system takes would fail only when the finished data is written.
void checkNameLength(const Target& t, const std::string& what) {
  const size_t name = t.file.filename().string().size();
  const long nameMax = ::pathconf(t.dir.c_str(), _PC_NAME_MAX);
  const size_t limit = nameMax > 0 ? size_t(nameMax) : 255;
  if (name > limit)
    throw Error(what, "the file name is " + std::to_string(name) + " bytes long, more than the " +
                          std::to_string(limit) + " this file system takes — choose a shorter name");
  if (t.file.string().size() >= PATH_MAX)
    throw Error(what, "the path is " + std::to_string(t.file.string().size()) +
                          " bytes long, more than the " + std::to_string(PATH_MAX - 1) +
                          " the system takes — choose a shorter path");
}

Target inspectTarget(const std::string& path, const std::string& what) {
  if (path.empty()) throw Error(what, "empty output path — give a file name");
  Target t;
  t.file = resolveLinks(path, what);
  t.dir = t.file.parent_path().empty() ? fs::path(".") : t.file.parent_path();
  struct stat dst {};
  if (::stat(t.dir.c_str(), &dst) != 0)
    throw Error(what, "the folder " + t.dir.string() + " does not exist (" + errnoText(errno) +
                          ") — create it first or choose another path");
  if (!S_ISDIR(dst.st_mode)) throw Error(what, t.dir.string() + " is not a folder — choose another path");
  checkNameLength(t, what);
  struct stat st {};
  if (::stat(t.file.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error(what, "is a folder — give a file name inside it");
    if (!S_ISREG(st.st_mode))
      throw Error(what, "is not a regular file (a FIFO, device or socket) — choose a file path");
    if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0 || ::access(t.file.c_str(), W_OK) != 0)
      throw Error(what, "is read-only — make it writable (chmod u+w) or choose another path");
    if (isOpenInput(st))
      throw Error(what,
                  "is an input of this command (the same file, compared by device and inode) — an "
                  "export never replaces its input; choose another path");
    t.exists = true;
    t.mode = st.st_mode & 07777;
  }
  if (::access(t.dir.c_str(), W_OK | X_OK) != 0)
    throw Error(what, "cannot create files in the folder " + t.dir.string() + " (" + errnoText(errno) +
                          ") — choose a writable folder");
  return t;
}

std::string tempPrefix(const Target& t) {
  // append rather than `"." + std::string`: the latter trips a GCC 12 -Wrestrict false positive. At most
  // 200 bytes of the name, so that the temporary's name fits wherever the target's does.
  std::string prefix = ".";
  prefix.append(t.file.filename().string().substr(0, 200)).append(".tmp-");
  return prefix;
}

// A fresh hidden name beside the target: .<name>.tmp-<pid>-<counter>-<random>.
fs::path tempName(const Target& t) {
  static std::atomic<unsigned> counter{0};
  static thread_local std::mt19937 rng{std::random_device{}()};
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, "%ld-%u-%u", static_cast<long>(::getpid()), counter++,
                static_cast<unsigned>(rng() % 1000000));
  return t.dir / (tempPrefix(t) + suffix);
}

// Removes named temporaries of this target left by processes that no longer exist (killed in the
// microseconds between link and rename, or on file systems without O_TMPFILE).
void removeStaleTemps(const Target& t) {
  DIR* d = ::opendir(t.dir.c_str());
  if (!d) return;
  const std::string prefix = tempPrefix(t);
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      ::unlink((t.dir / name).c_str());
  }
  ::closedir(d);
}

// Holds back the signals that end a process by default while the target is being replaced.
class SignalHold {
 public:
  SignalHold() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~SignalHold() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalHold(const SignalHold&) = delete;
  SignalHold& operator=(const SignalHold&) = delete;

 private:
  sigset_t old_{};
};

// The temporary file: unnamed (O_TMPFILE) when the file system allows it, else a hidden name.
class TempFile {
 public:
  explicit TempFile(const Target& t, const std::string& what) : target_(t), what_(what) {
    fd_ = ::open(t.dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
    if (fd_ >= 0) {
      path_ = "/proc/self/fd/" + std::to_string(fd_);
      if (::access(path_.c_str(), W_OK) == 0) return;  // writers open the file through this link
      ::close(fd_);
    }
    createNamed();
  }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!named_.empty()) ::unlink(named_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }

  // Keeps the old file's permission bits, flushes, and moves the data over the target.
  void commit() {
    if (target_.exists) ::fchmod(fd_, target_.mode);
    if (::fsync(fd_) != 0 && errno != EINVAL)
      fail("cannot flush the data to disk (" + errnoText(errno) + ") — check free disk space");
    SignalHold hold;
    if (named_.empty()) linkTemp();
    if (::rename(named_.c_str(), target_.file.c_str()) != 0)
      fail("cannot move the finished file into place (" + errnoText(errno) +
           ") — check permissions of the folder");
    named_.clear();
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw Error(what_, problem); }

  void createNamed() {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const fs::path name = tempName(target_);
      fd_ = ::open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0666);
      if (fd_ >= 0) {
        named_ = path_ = name.string();
        return;
      }
      if (errno != EEXIST)
        fail("cannot create a temporary file in " + target_.dir.string() + " (" + errnoText(errno) +
             ") — check that the folder is writable");
    }
    fail("cannot find a free temporary file name in " + target_.dir.string());
  }

  // Gives the unnamed file a hidden name so that rename can replace the target in one step.
  void linkTemp() {
    for (int attempt = 0; attempt < 100; ++attempt) {
      const fs::path name = tempName(target_);
      if (::linkat(AT_FDCWD, path_.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        named_ = name.string();
        return;
      }
      if (errno != EEXIST)
        fail("cannot link the finished file into " + target_.dir.string() + " (" + errnoText(errno) + ")");
    }
    fail("cannot find a free temporary file name in " + target_.dir.string());
  }

  Target target_;
  std::string what_;
  int fd_ = -1;
  std::string path_;   // what writers open
  std::string named_;  // the hidden name while one exists (removed unless renamed)
};

void syncFolder(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: durability, not correctness, depends on it
  ::fsync(fd);
  ::close(fd);
}

// Writers name the file they were given; a message about the temporary must name the real target.
std::string replaceAll(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; !from.empty() && (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

}  // namespace

void writeAtomically(const std::string& path, const std::function<void(const std::string& tempPath)>& write) {
  const Target target = inspectTarget(path, path);
  removeStaleTemps(target);
  TempFile temp(target, path);
  try {
    write(temp.path());
  } catch (const Error& e) {
    if (e.where().find(temp.path()) == std::string::npos &&
        e.problem().find(temp.path()) == std::string::npos)
      throw;
    throw Error(replaceAll(e.where(), temp.path(), path), replaceAll(e.problem(), temp.path(), path));
  }
  temp.commit();
  syncFolder(target.dir);
}

void writeTextAtomically(const std::string& path, const std::string& contents) {
  writeAtomically(path, [&](const std::string& tempPath) {
    std::ofstream out(tempPath, std::ios::binary | std::ios::trunc);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) throw Error(path, "cannot write the file — check free disk space and permissions");
  });
}

void checkWritableTarget(const std::string& path, const std::string& what) {
  const Target t = inspectTarget(path, what);
  // Probe that the folder really takes new files (read-only mounts, quotas on inodes): an unnamed file
  // vanishes on close and leaves nothing behind.
  const int fd = ::open(t.dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
  } else if (errno == EROFS || errno == EACCES || errno == EPERM || errno == ENOSPC || errno == EDQUOT) {
    throw Error(what, "cannot create files in the folder " + t.dir.string() + " (" + errnoText(errno) +
                          ") — choose a writable folder");
  }
}

InputFileGuard::InputFileGuard(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  device_ = st.st_dev;
  inode_ = st.st_ino;
  active_ = true;
  std::lock_guard lock(inputsMutex());
  openInputs().insert({device_, inode_});
}

InputFileGuard::~InputFileGuard() {
  if (!active_) return;
  std::lock_guard lock(inputsMutex());
  auto it = openInputs().find({device_, inode_});
  if (it != openInputs().end()) openInputs().erase(it);
}

}  // namespace sparge::core
