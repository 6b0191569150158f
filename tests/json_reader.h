// A small JSON reader for the tests that check ftl's Chrome trace files, and
// for ftl_bench's --pair-merge, which reads the JSON of --threads-pair runs:
// it parses the whole grammar (objects, arrays, strings with escapes,
// numbers, true/false/null) and reports the first syntax error by offset, so
// a test that reads a trace also checks that the file is valid JSON.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ftl_test {

struct Json {
    enum class Type { Null, Bool, Number, String, Array, Object } Kind = Type::Null;
    bool Boolean = false;
    double Number = 0;
    std::string Text;
    std::vector<Json> Items;
    std::map<std::string, Json> Members;

    bool Has(std::string const &key) const { return Members.count(key) != 0; }
    Json const &operator[](std::string const &key) const {
        auto it = Members.find(key);
        if (it == Members.end()) {
            throw std::runtime_error("no member \"" + key + "\"");
        }
        return it->second;
    }
};

class JsonReader {
public:
    explicit JsonReader(std::string text) : m_text(std::move(text)) {}

    Json Parse() {
        Json value = Value();
        Space();
        if (m_at != m_text.size()) {
            Fail("text after the value");
        }
        return value;
    }

private:
    [[noreturn]] void Fail(char const *what) const {
        throw std::runtime_error(std::string("JSON: ") + what + " at offset " + std::to_string(m_at));
    }
    void Space() {
        while (m_at < m_text.size() && (m_text[m_at] == ' ' || m_text[m_at] == '\n' || m_text[m_at] == '\r' ||
                                        m_text[m_at] == '\t')) {
            ++m_at;
        }
    }
    char Peek() {
        Space();
        if (m_at == m_text.size()) {
            Fail("unexpected end");
        }
        return m_text[m_at];
    }
    void Expect(char c) {
        if (Peek() != c) {
            Fail("unexpected character");
        }
        ++m_at;
    }
    bool Word(char const *word) {
        std::string const w(word);
        if (m_text.compare(m_at, w.size(), w) == 0) {
            m_at += w.size();
            return true;
        }
        return false;
    }
    std::string String() {
        Expect('"');
        std::string out;
        while (true) {
            if (m_at == m_text.size()) {
                Fail("unterminated string");
            }
            char const c = m_text[m_at++];
            if (c == '"') {
                return out;
            }
            if (static_cast<unsigned char>(c) < 0x20) {
                Fail("control character in a string");
            }
            if (c != '\\') {
                out += c;
                continue;
            }
            if (m_at == m_text.size()) {
                Fail("unterminated escape");
            }
            char const e = m_text[m_at++];
            switch (e) {
            case '"':
            case '\\':
            case '/':
                out += e;
                break;
            case 'n':
                out += '\n';
                break;
            case 't':
                out += '\t';
                break;
            case 'r':
                out += '\r';
                break;
            case 'b':
                out += '\b';
                break;
            case 'f':
                out += '\f';
                break;
            case 'u': {
                if (m_at + 4 > m_text.size()) {
                    Fail("short \\u escape");
                }
                unsigned long const code = std::strtoul(m_text.substr(m_at, 4).c_str(), nullptr, 16);
                m_at += 4;
                out += code < 0x80 ? static_cast<char>(code) : '?';
                break;
            }
            default:
                Fail("bad escape");
            }
        }
    }
    Json Value() {
        Json value;
        char const c = Peek();
        if (c == '{') {
            value.Kind = Json::Type::Object;
            ++m_at;
            if (Peek() == '}') {
                ++m_at;
                return value;
            }
            while (true) {
                std::string key = String();
                Expect(':');
                value.Members[key] = Value();
                if (Peek() == ',') {
                    ++m_at;
                    continue;
                }
                Expect('}');
                return value;
            }
        }
        if (c == '[') {
            value.Kind = Json::Type::Array;
            ++m_at;
            if (Peek() == ']') {
                ++m_at;
                return value;
            }
            while (true) {
                value.Items.push_back(Value());
                if (Peek() == ',') {
                    ++m_at;
                    continue;
                }
                Expect(']');
                return value;
            }
        }
        if (c == '"') {
            value.Kind = Json::Type::String;
            value.Text = String();
            return value;
        }
        if (Word("true") || Word("false")) {
            value.Kind = Json::Type::Bool;
            value.Boolean = m_text[m_at - 1] == 'e' && m_text[m_at - 2] == 'u';
            return value;
        }
        if (Word("null")) {
            return value;
        }
        char *end = nullptr;
        value.Number = std::strtod(m_text.c_str() + m_at, &end);
        if (end == m_text.c_str() + m_at) {
            Fail("not a value");
        }
        value.Kind = Json::Type::Number;
        m_at = static_cast<std::size_t>(end - m_text.c_str());
        return value;
    }

    std::string m_text;
    std::size_t m_at = 0;
};

inline Json ReadJsonFile(std::string const &path) {
    std::FILE *file = std::fopen(path.c_str(), "rb");
    if (file == nullptr) {
        throw std::runtime_error("cannot open " + path);
    }
    std::string text;
    char buffer[65536];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, file)) != 0) {
        text.append(buffer, n);
    }
    std::fclose(file);
    return JsonReader(text).Parse();
}

} // namespace ftl_test
