// The test runner on Windows: a main of its own that also runs the children
// of RunInChild, and the helpers of test_support.h that need <windows.h>
// (whose macros must stay out of the test files). On Linux the runner is
// catch_main.cpp.

// A child of RunInChild must end the way the code under test ends it: an
// abort or a crash must reach the system, not become a Catch2 test failure.
// GCC builds get no SEH handler from Catch2 anyway; MSVC builds would. Only
// Catch2's implementation reads this switch, and this file alone compiles it.
#define CATCH_CONFIG_NO_WINDOWS_SEH
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

// Catch2's implementation included <windows.h>, whose Yield() macro (a
// 16-bit Windows relic) would swallow TaskScheduler::Yield's declaration.
#undef Yield

#include "test_support.h"

#include <cstdio>
#include <cstdlib>
#include <cwchar>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <io.h>
#include <windows.h>

namespace ftl_test {

namespace {

// How the test process tells a child what to run: the test case, the number
// of the RunInChild call whose body the child runs, and the file holding the
// rest (see ChildRequest).
constexpr wchar_t kCaseVariable[] = L"FTL_TEST_CHILD_CASE";
constexpr wchar_t kCallVariable[] = L"FTL_TEST_CHILD_CALL";
constexpr wchar_t kRequestVariable[] = L"FTL_TEST_CHILD_RESULTS";

// The status TerminateProcess gives a child that ran out of time.
constexpr UINT kTimedOutStatus = 124;

std::wstring Widen(std::string const &text) {
    if (text.empty()) {
        return std::wstring();
    }
    int const length =
        MultiByteToWideChar(CP_UTF8, 0, text.data(), static_cast<int>(text.size()), nullptr, 0);
    std::wstring wide(static_cast<std::size_t>(length), L'\0');
    MultiByteToWideChar(CP_UTF8, 0, text.data(), static_cast<int>(text.size()), wide.data(), length);
    return wide;
}

std::string Narrow(std::wstring const &wide) {
    if (wide.empty()) {
        return std::string();
    }
    int const length = WideCharToMultiByte(CP_UTF8, 0, wide.data(), static_cast<int>(wide.size()), nullptr, 0,
                                           nullptr, nullptr);
    std::string text(static_cast<std::size_t>(length), '\0');
    WideCharToMultiByte(CP_UTF8, 0, wide.data(), static_cast<int>(wide.size()), text.data(), length, nullptr,
                        nullptr);
    return text;
}

bool GetVariable(wchar_t const *name, std::wstring &value) {
    DWORD const size = GetEnvironmentVariableW(name, nullptr, 0);
    if (size == 0) {
        return false;
    }
    value.assign(size, L'\0');
    DWORD const length = GetEnvironmentVariableW(name, value.data(), size);
    value.resize(length);
    return true;
}

std::string ErrorText(char const *what) {
    return std::string("RunInChild: ") + what + " failed (error " + std::to_string(GetLastError()) + ")";
}

// The request file: numbers, and strings as their length, a space, and their
// bytes, each followed by a newline. Stderr texts hold any byte.
void PutNumber(std::string &out, long long value) {
    out += std::to_string(value);
    out += '\n';
}

void PutString(std::string &out, std::string const &text) {
    out += std::to_string(text.size());
    out += ' ';
    out += text;
    out += '\n';
}

class RequestReader {
public:
    explicit RequestReader(std::string text) : m_text(std::move(text)) {}

    bool Ok() const { return m_ok; }

    long long Number() {
        char const *begin = m_text.c_str() + m_pos;
        char *end = nullptr;
        long long const value = std::strtoll(begin, &end, 10);
        if (end == begin || *end != '\n') {
            m_ok = false;
            return 0;
        }
        m_pos += static_cast<std::size_t>(end - begin) + 1;
        return value;
    }

    std::string String() {
        char const *begin = m_text.c_str() + m_pos;
        char *end = nullptr;
        unsigned long long const length = std::strtoull(begin, &end, 10);
        std::size_t const start = m_pos + static_cast<std::size_t>(end - begin) + 1;
        if (end == begin || *end != ' ' || start > m_text.size() || length > m_text.size() - start ||
            m_text[start + length] != '\n') {
            m_ok = false;
            return std::string();
        }
        m_pos = start + length + 1;
        return m_text.substr(start, length);
    }

private:
    std::string m_text;
    std::size_t m_pos = 0;
    bool m_ok = true;
};

// What a child is asked to do: run Call of TestCase, returning the parent's
// results for the calls before it. The parent's id, random seed and section
// filter come along, so that the child runs the test case as the parent did.
struct ChildRequest {
    bool Active = false;
    std::string TestCase;
    unsigned Call = 0;
    unsigned long ParentId = 0;
    unsigned RngSeed = 0;
    std::vector<std::string> Sections;
    std::vector<ChildResult> Earlier;
};

ChildRequest &Request() {
    static ChildRequest request;
    return request;
}

// The RunInChild calls of the test case that runs now.
struct CallLog {
    std::string TestCase;
    unsigned Next = 0;
    std::vector<ChildResult> Results; // the test process: what each call returned
    bool BodyStarted = false;         // a child: its own call's body began
};

CallLog &Log() {
    static CallLog log;
    return log;
}

std::string WriteRequest(unsigned long parentId, std::vector<ChildResult> const &earlier) {
    std::string out = "ftl_test child request 1\n";
    PutNumber(out, static_cast<long long>(parentId));
    auto const &config = Catch::getCurrentContext().getConfig();
    PutNumber(out, static_cast<long long>(config->rngSeed()));
    std::vector<std::string> const &sections = config->getSectionsToRun();
    PutNumber(out, static_cast<long long>(sections.size()));
    for (std::string const &section : sections) {
        PutString(out, section);
    }
    PutNumber(out, static_cast<long long>(earlier.size()));
    for (ChildResult const &result : earlier) {
        PutNumber(out, result.Exited);
        PutNumber(out, result.ExitCode);
        PutNumber(out, result.Signaled);
        PutNumber(out, result.Signal);
        PutNumber(out, result.TimedOut);
        PutString(out, result.Stderr);
    }
    return out;
}

bool ReadRequest(std::string text, ChildRequest &request) {
    std::string const magic = "ftl_test child request 1\n";
    if (text.compare(0, magic.size(), magic) != 0) {
        return false;
    }
    RequestReader in(text.substr(magic.size()));
    request.ParentId = static_cast<unsigned long>(in.Number());
    request.RngSeed = static_cast<unsigned>(in.Number());
    for (long long n = in.Number(); n > 0 && in.Ok(); --n) {
        request.Sections.push_back(in.String());
    }
    for (long long n = in.Number(); n > 0 && in.Ok(); --n) {
        ChildResult result;
        result.Exited = in.Number() != 0;
        result.ExitCode = static_cast<int>(in.Number());
        result.Signaled = in.Number() != 0;
        result.Signal = static_cast<int>(in.Number());
        result.TimedOut = in.Number() != 0;
        result.Stderr = in.String();
        request.Earlier.push_back(result);
    }
    return in.Ok();
}

bool WriteTextFile(std::filesystem::path const &path, std::string const &text) {
    FILE *file = _wfopen(path.c_str(), L"wb");
    if (file == nullptr) {
        return false;
    }
    bool const written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
    return std::fclose(file) == 0 && written;
}

bool ReadTextFile(std::filesystem::path const &path, std::string &text) {
    FILE *file = _wfopen(path.c_str(), L"rb");
    if (file == nullptr) {
        return false;
    }
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
        text.append(buffer, n);
    }
    bool const ok = std::ferror(file) == 0;
    std::fclose(file);
    return ok;
}

// The environment of this process, with the child's request in place of any
// request this process was given.
std::wstring ChildEnvironment(std::string const &testCase, unsigned call, std::wstring const &requestPath) {
    std::wstring block;
    wchar_t *environment = GetEnvironmentStringsW();
    if (environment != nullptr) {
        for (wchar_t const *entry = environment; *entry != L'\0'; entry += std::wcslen(entry) + 1) {
            if (_wcsnicmp(entry, L"FTL_TEST_CHILD_", 15) != 0) {
                block.append(entry);
                block.push_back(L'\0');
            }
        }
        FreeEnvironmentStringsW(environment);
    }
    block.append(kCaseVariable).append(L"=").append(Widen(testCase)).push_back(L'\0');
    block.append(kCallVariable).append(L"=").append(std::to_wstring(call)).push_back(L'\0');
    block.append(kRequestVariable).append(L"=").append(requestPath).push_back(L'\0');
    block.push_back(L'\0');
    return block;
}

std::wstring ProgramPath() {
    std::wstring path(MAX_PATH, L'\0');
    for (;;) {
        DWORD const length = GetModuleFileNameW(nullptr, path.data(), static_cast<DWORD>(path.size()));
        if (length == 0) {
            return std::wstring();
        }
        if (length < path.size()) {
            path.resize(length);
            return path;
        }
        path.resize(path.size() * 2);
    }
}

// Collects what the child writes to stderr, on a thread of its own: a child
// writing more than the pipe holds would otherwise block while the test
// process waits for it to end.
struct PipeReader {
    HANDLE Pipe = nullptr;
    std::string Text;

    static DWORD WINAPI Run(void *arg) {
        auto *reader = static_cast<PipeReader *>(arg);
        char buffer[4096];
        DWORD n = 0;
        // Ends when every copy of the write end is closed (the child's, and
        // those of any process it started), or when cancelled.
        while (::ReadFile(reader->Pipe, buffer, sizeof(buffer), &n, nullptr) && n > 0) {
            reader->Text.append(buffer, n);
        }
        return 0;
    }
};

// Where a child's status goes: the status of a process that an exception
// nothing handled ended is that exception's code, an error-severity status
// (0xC0000005, an access violation), which plays the part of a signal.
void SetStatus(ChildResult &result, DWORD status) {
    if ((status & 0xC0000000u) == 0xC0000000u) {
        result.Signaled = true;
        result.Signal = static_cast<int>(status);
    } else {
        result.Exited = true;
        result.ExitCode = static_cast<int>(status);
    }
}

ChildResult RunChildProcess(unsigned index, std::chrono::seconds timeout) {
    ChildResult result;
    // Like the POSIX runner's pipe or fork failing: TimedOut, so that
    // neither Died() nor a clean exit can pass.
    auto const failed = [&result](std::string const &what) {
        result.Stderr = what;
        result.TimedOut = true;
        return result;
    };
    auto const deadline = std::chrono::steady_clock::now() + timeout;
    auto const msLeft = [deadline] {
        auto const left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        return left.count() > 0 ? static_cast<DWORD>(left.count()) : DWORD{0};
    };

    std::wstring const program = ProgramPath();
    if (program.empty()) {
        return failed(ErrorText("GetModuleFileNameW"));
    }
    std::error_code error;
    std::filesystem::path const requestPath =
        std::filesystem::temp_directory_path(error) /
        ("ftl_test_child_" + std::to_string(GetCurrentProcessId()) + "_" + std::to_string(index) + ".txt");
    if (error || !WriteTextFile(requestPath, WriteRequest(GetCurrentProcessId(), Log().Results))) {
        return failed("RunInChild: cannot write " + requestPath.string());
    }
    struct RemoveRequest {
        std::filesystem::path const &Path;
        ~RemoveRequest() { _wremove(Path.c_str()); }
    } const removeRequest{requestPath};

    SECURITY_ATTRIBUTES inheritable{};
    inheritable.nLength = sizeof(inheritable);
    inheritable.bInheritHandle = TRUE;
    HANDLE readEnd = nullptr;
    HANDLE writeEnd = nullptr;
    if (!CreatePipe(&readEnd, &writeEnd, &inheritable, 64 * 1024)) {
        return failed(ErrorText("CreatePipe"));
    }
    SetHandleInformation(readEnd, HANDLE_FLAG_INHERIT, 0);
    HANDLE const nul = CreateFileW(L"NUL", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                                   &inheritable, OPEN_EXISTING, 0, nullptr);
    STARTUPINFOW startup{};
    startup.cb = sizeof(startup);
    startup.dwFlags = STARTF_USESTDHANDLES;
    startup.hStdInput = nul;
    startup.hStdOutput = nul;
    startup.hStdError = writeEnd;
    std::wstring commandLine = L"\"" + program + L"\"";
    std::wstring environment = ChildEnvironment(Log().TestCase, index, requestPath.wstring());
    PROCESS_INFORMATION process{};
    BOOL const started =
        CreateProcessW(program.c_str(), commandLine.data(), nullptr, nullptr, TRUE,
                       CREATE_UNICODE_ENVIRONMENT, environment.data(), nullptr, &startup, &process);
    std::string const startError = started ? std::string() : ErrorText("CreateProcessW");
    // The child holds its own copies now: the pipe ends when the child does.
    CloseHandle(writeEnd);
    if (nul != INVALID_HANDLE_VALUE) {
        CloseHandle(nul);
    }
    if (!started) {
        CloseHandle(readEnd);
        return failed(startError);
    }
    CloseHandle(process.hThread);

    auto *reader = new PipeReader;
    reader->Pipe = readEnd;
    HANDLE const thread = CreateThread(nullptr, 0, &PipeReader::Run, reader, 0, nullptr);
    if (thread == nullptr) {
        std::string const threadError = ErrorText("CreateThread");
        TerminateProcess(process.hProcess, kTimedOutStatus);
        CloseHandle(process.hProcess);
        CloseHandle(readEnd);
        delete reader;
        return failed(threadError);
    }

    if (WaitForSingleObject(process.hProcess, msLeft()) != WAIT_OBJECT_0) {
        result.TimedOut = true;
        TerminateProcess(process.hProcess, kTimedOutStatus);
        WaitForSingleObject(process.hProcess, INFINITE);
    }
    DWORD status = 0;
    GetExitCodeProcess(process.hProcess, &status);
    CloseHandle(process.hProcess);
    SetStatus(result, status);

    // A process the child started may still hold the pipe: as on POSIX,
    // that counts against the timeout. A child killed at the deadline leaves
    // the reader a moment for what is still in the pipe.
    bool readerDone = true;
    if (WaitForSingleObject(thread, result.TimedOut ? DWORD{1000} : msLeft()) != WAIT_OBJECT_0) {
        result.TimedOut = true;
        CancelSynchronousIo(thread);
        readerDone = WaitForSingleObject(thread, 1000) == WAIT_OBJECT_0;
    }
    CloseHandle(thread);
    if (readerDone) {
        result.Stderr = reader->Text;
        CloseHandle(readEnd);
        delete reader;
    } else {
        // Left to the reader thread, still blocked in ReadFile.
        result.Stderr = "RunInChild: the child's stderr was never closed";
    }
    return result;
}

// Catch2 v2's test spec for the test case named `name` alone. Quoted, so that
// a leading '~', '[' or space is part of the name; a backslash escapes the
// characters the parser still reads inside quotes: ',', '"' and '\'. (A name
// that begins or ends with '*' would still be a wildcard: Catch2 v2 has no
// escape for that.)
std::string TestSpecFor(std::string const &name) {
    std::string spec = "\"";
    for (char c : name) {
        if (c == ',' || c == '"' || c == '\\') {
            spec += '\\';
        }
        spec += c;
    }
    spec += '"';
    return spec;
}

// Ends a child that cannot do what it was asked.
[[noreturn]] void ChildFails(char const *why) {
    ChildRequest const &request = Request();
    std::fprintf(stderr, "ftl_test: the child for RunInChild call %u of test case \"%s\" %s\n", request.Call,
                 request.TestCase.c_str(), why);
    std::fflush(nullptr);
    TerminateProcess(GetCurrentProcess(), 1);
    std::_Exit(1);
}

// Reads the request this process was started with, if it is a child.
bool LoadRequest() {
    std::wstring testCase;
    if (!GetVariable(kCaseVariable, testCase)) {
        return false;
    }
    ChildRequest &request = Request();
    request.Active = true;
    request.TestCase = Narrow(testCase);
    std::wstring call;
    std::wstring path;
    std::string text;
    if (!GetVariable(kCallVariable, call) || !GetVariable(kRequestVariable, path)) {
        ChildFails("has an incomplete environment");
    }
    request.Call = static_cast<unsigned>(std::wcstoul(call.c_str(), nullptr, 10));
    if (!ReadTextFile(std::filesystem::path(path), text) || !ReadRequest(text, request) ||
        request.Earlier.size() != request.Call) {
        ChildFails("cannot read its request file");
    }
    return true;
}

// A child: runs the one test case, whose RunInChild call Request().Call ends
// the process (EndChild).
int RunChild(char const *program) {
    ChildRequest const &request = Request();
    // A crash must end the child, never wait in an error dialog.
    SetErrorMode(SEM_FAILCRITICALERRORS | SEM_NOGPFAULTERRORBOX | SEM_NOOPENFILEERRORBOX);
    // stderr as on POSIX: unbuffered, since abort() flushes nothing and the
    // message before it is what a test checks; and binary, so that the test
    // process reads "\n" where the child wrote it, not "\r\n".
    std::setvbuf(stderr, nullptr, _IONBF, 0);
    _setmode(_fileno(stderr), _O_BINARY);
    // The reporter writes to stdout, which is NUL.
    std::vector<std::string> args = {program, TestSpecFor(request.TestCase), "--rng-seed",
                                     std::to_string(request.RngSeed)};
    for (std::string const &section : request.Sections) {
        args.push_back("--section");
        args.push_back(section);
    }
    std::vector<char const *> argv;
    for (std::string const &arg : args) {
        argv.push_back(arg.c_str());
    }
    Catch::Session session;
    if (session.applyCommandLine(static_cast<int>(argv.size()), argv.data()) != 0) {
        ChildFails("cannot select its test case");
    }
    session.run();
    if (Log().BodyStarted) {
        ChildFails("did not return from its body (an exception or a failed REQUIRE)");
    }
    ChildFails("never reached its call: the test case took another path than in the test process");
}

} // namespace

namespace detail {

ChildCall NextChildCall() {
    CallLog &log = Log();
    std::string const testCase = Catch::getResultCapture().getCurrentTestName();
    if (testCase != log.TestCase) {
        log.TestCase = testCase;
        log.Next = 0;
        log.Results.clear();
    }
    ChildCall call;
    call.Index = log.Next++;
    ChildRequest const &request = Request();
    if (!request.Active) {
        call.What = ChildCall::Role::Start;
        return call;
    }
    if (log.BodyStarted) {
        ChildFails("did not return from its body (an exception or a failed REQUIRE)");
    }
    if (testCase != request.TestCase) {
        ChildFails(("ran another test case too: \"" + testCase + "\"").c_str());
    }
    if (call.Index < request.Call) {
        call.What = ChildCall::Role::Replay;
        call.Stored = request.Earlier[call.Index];
    } else {
        call.What = ChildCall::Role::Run;
        log.BodyStarted = true;
    }
    return call;
}

ChildResult StartChild(unsigned index, std::chrono::seconds timeout) {
    ChildResult const result = RunChildProcess(index, timeout);
    Log().Results.push_back(result);
    return result;
}

void EndChild() {
    std::fflush(nullptr);
    // Ends every thread at once, as _exit does on POSIX: ExitProcess would
    // run the DLLs' detach code while the scheduler's threads, killed at any
    // point, might hold the locks it takes.
    TerminateProcess(GetCurrentProcess(), 0);
    std::_Exit(0);
}

} // namespace detail

double ProcessCpuSeconds() {
    FILETIME creation{};
    FILETIME exit{};
    FILETIME kernel{};
    FILETIME user{};
    if (!GetProcessTimes(GetCurrentProcess(), &creation, &exit, &kernel, &user)) {
        return 0.0;
    }
    auto const seconds = [](FILETIME const &time) { // in units of 100 ns
        ULARGE_INTEGER value;
        value.LowPart = time.dwLowDateTime;
        value.HighPart = time.dwHighDateTime;
        return static_cast<double>(value.QuadPart) * 1e-7;
    };
    return seconds(kernel) + seconds(user);
}

unsigned AllowedCpuCount() {
    DWORD_PTR processMask = 0;
    DWORD_PTR systemMask = 0;
    if (!GetProcessAffinityMask(GetCurrentProcess(), &processMask, &systemMask)) {
        return 0;
    }
    return static_cast<unsigned>(CpuCount(processMask));
}

unsigned long TestProcessId() {
    ChildRequest const &request = Request();
    return request.Active ? request.ParentId : GetCurrentProcessId();
}

OsThreadId CurrentOsThread() {
    return GetCurrentThreadId();
}

CpuMask CurrentThreadCpus() {
    DWORD_PTR processMask = 0;
    DWORD_PTR systemMask = 0;
    if (!GetProcessAffinityMask(GetCurrentProcess(), &processMask, &systemMask)) {
        return 0;
    }
    // Setting a mask returns the previous one, which is put back at once.
    DWORD_PTR const previous = SetThreadAffinityMask(GetCurrentThread(), processMask);
    if (previous != 0) {
        SetThreadAffinityMask(GetCurrentThread(), previous);
    }
    return previous;
}

bool SetCurrentThreadCpus(CpuMask const &mask) {
    return SetThreadAffinityMask(GetCurrentThread(), static_cast<DWORD_PTR>(mask)) != 0;
}

void RaiseAccessFault() {
    // Through a volatile, so that the compiler sees no null pointer to
    // optimize around.
    std::uintptr_t volatile address = 16;
    *reinterpret_cast<int volatile *>(address) = 1;
}

} // namespace ftl_test

int main(int argc, char *argv[]) {
    if (ftl_test::LoadRequest()) {
        return ftl_test::RunChild(argv[0]);
    }
    return Catch::Session().run(argc, argv);
}
