# Writes a C++ source defining ppolab::vote_page_html() (serve.h) as the bytes
# of vote_page.html in a raw string literal, so the ppolab binary never reads
# its own source tree at run time.
# Usage: cmake -DPAGE=.../vote_page.html -DOUT=... -P embed_vote_page.cmake
file(READ "${PAGE}" text)
string(FIND "${text}" ")ppolab_page\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${PAGE} contains the raw-string delimiter )ppolab_page\"")
endif()
set(body "// Generated from src/feedback/vote_page.html by embed_vote_page.cmake — do not edit.\n")
string(APPEND body "#include <string>\n\nnamespace ppolab {\n\n")
string(APPEND body "const std::string& vote_page_html() {\n")
string(APPEND body "    static const std::string page = R\"ppolab_page(${text})ppolab_page\";\n")
string(APPEND body "    return page;\n}\n\n}  // namespace ppolab\n")
file(WRITE "${OUT}" "${body}")
