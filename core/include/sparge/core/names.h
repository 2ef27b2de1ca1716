// Entry names and paths come from files and may hold any bytes: how exports store them and how
// terminals and messages show them.
#pragma once

#include <string>
#include <string_view>

namespace sparge::core {

bool isValidUtf8(std::string_view text);

// For JSON and CSV exports: valid UTF-8 is returned unchanged; otherwise every byte that is not part of
// a valid UTF-8 sequence becomes "\xNN" and every backslash "\\", so the text is valid UTF-8 (JSON
// requires it) and two invalid names never share a form. (A valid name that already spells an escaped
// form, such as the four characters a\xff next to the bytes 'a' 0xFF, would share it.)
std::string utf8Safe(std::string_view text);

// For terminals and messages: utf8Safe, and control characters (C0, DEL and C1, which terminals
// interpret) written as "\xNN" / "\u00NN", so a name can never move the cursor or recolour the screen.
std::string printable(std::string_view text);

// For echoing strings a user or a file gave (names, paths, attribute values) in messages and tables:
// printable(text) when it has at most `maxBytes` bytes; else its start and end (together `maxBytes` bytes,
// cut between UTF-8 sequences) around an ellipsis, with the original length:
// "model.decoder.layers.0.…ncoder_attn (10485760 bytes)". Exports keep names whole.
inline constexpr size_t kDisplayBytes = 120;
std::string shortForDisplay(std::string_view text, size_t maxBytes = kDisplayBytes);

}  // namespace sparge::core
