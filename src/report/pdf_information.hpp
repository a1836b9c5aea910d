#pragma once
// A PDF's document information (/Creator, /Subject) set by an incremental update (PDF 32000-1 §7.5.6): the Info
// object written again after the file's last %%EOF, with a cross-reference section for it and a trailer whose /Prev
// points back, so no byte of the original file moves or changes.
//
// Both kinds of file gnuplot's pdfcairo writes are extended: a classic cross-reference table and trailer (cairo 1.16,
// Debian 12), and a cross-reference stream (cairo ≥ 1.17.6; the update is then an uncompressed cross-reference stream
// too; tested on a file of that layout made by qpdf, tests/fixtures/README.md). The Info object's existing entries (cairo's /Producer, /CreationDate) are kept, also when they sit in a
// Flate-compressed object stream; /Creator and /Subject replace any the file had.
#include <cstdint>
#include <string>

namespace rankscope {

// "rankscope 0.1.0 (git ...)" as /Creator, `subject` (the whole provenance text) as /Subject, both UTF-16BE text
// strings. Returns `pdf` unchanged when its last cross-reference section cannot be read (not a PDF cairo wrote).
std::string pdf_with_document_information(std::string pdf, const std::string& creator, const std::string& subject);

// A PDF text string for any UTF-8 text: UTF-16BE after its byte-order mark, written in hex (nothing to escape). A byte
// that does not start a valid sequence becomes U+FFFD.
std::string pdf_text_string(const std::string& utf8);

// The low `bytes` bytes of `value`, most significant first (a PDF cross-reference stream's fields, a PNG chunk's
// length and CRC).
std::string big_endian(std::uint64_t value, int bytes);

}  // namespace rankscope
