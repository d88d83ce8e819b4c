# cmake -DINPUT=<file> -DOUTPUT=<file.c> -DSYMBOL=<name> -P embed_text.cmake
# Writes a C file defining `const char SYMBOL[]` holding INPUT's bytes.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUTPUT}"
  "/* Generated from ${INPUT}; do not edit. */\n"
  "const char ${SYMBOL}[] = {${bytes} 0x00};\n")
