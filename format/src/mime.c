/*
 * mime.c - the extension table (sf/mime.h).
 */
#include "sf/mime.h"

#include <stdlib.h>
#include <string.h>

/* Longest extension looked up; longer ones cannot be in the table. */
#define EXT_MAX 16

typedef struct ext_type {
    const char *ext; /* lowercase, without the dot; the table is sorted by it */
    const char *type;
} ext_type;

static const ext_type table[] = {
    {"7z", "application/x-7z-compressed"},
    {"aac", "audio/aac"},
    {"apng", "image/apng"},
    {"atom", "application/atom+xml"},
    {"avif", "image/avif"},
    {"bin", "application/octet-stream"},
    {"bmp", "image/bmp"},
    {"br", "application/x-brotli"},
    {"bz2", "application/x-bzip2"},
    {"cjs", "text/javascript"},
    {"css", "text/css"},
    {"csv", "text/csv"},
    {"eot", "application/vnd.ms-fontobject"},
    {"epub", "application/epub+zip"},
    {"flac", "audio/flac"},
    {"geojson", "application/geo+json"},
    {"gif", "image/gif"},
    {"glb", "model/gltf-binary"},
    {"gltf", "model/gltf+json"},
    {"gz", "application/gzip"},
    {"htm", "text/html"},
    {"html", "text/html"},
    {"ico", "image/x-icon"},
    {"ics", "text/calendar"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript"},
    {"json", "application/json"},
    {"jsonld", "application/ld+json"},
    {"jsx", "text/javascript"},
    {"jxl", "image/jxl"},
    {"ktx2", "image/ktx2"},
    {"m3u8", "application/vnd.apple.mpegurl"},
    {"m4a", "audio/mp4"},
    {"m4s", "video/iso.segment"},
    {"m4v", "video/mp4"},
    {"map", "application/json"},
    {"md", "text/markdown"},
    {"mjs", "text/javascript"},
    {"mov", "video/quicktime"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"mpd", "application/dash+xml"},
    {"mpeg", "video/mpeg"},
    {"oga", "audio/ogg"},
    {"ogg", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"opus", "audio/ogg"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"rss", "application/rss+xml"},
    {"rtf", "application/rtf"},
    {"srt", "application/x-subrip"},
    {"svg", "image/svg+xml"},
    {"svgz", "image/svg+xml"}, /* stored decompressed: see pk_svgz_key */
    {"tar", "application/x-tar"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"toml", "application/toml"},
    {"ts", "video/mp2t"}, /* MPEG transport stream (HLS segments), not TypeScript */
    {"ttc", "font/collection"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain"},
    {"vtt", "text/vtt"},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"weba", "audio/webm"},
    {"webm", "video/webm"},
    {"webmanifest", "application/manifest+json"},
    {"webp", "image/webp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xhtml", "application/xhtml+xml"},
    {"xml", "application/xml"},
    {"xsl", "application/xslt+xml"},
    {"xz", "application/x-xz"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"zip", "application/zip"},
    {"zst", "application/zstd"},
};

static int cmp_ext(const void *k, const void *e)
{
    return strcmp(k, ((const ext_type *)e)->ext);
}

const char *sf_mime_by_ext(const char *name, size_t len)
{
    size_t i = len;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    /* No dot in the last segment, or a name that is only ".ext": no extension. */
    if (i == 0 || name[i - 1] != '.' || i < 2 || name[i - 2] == '/')
        return NULL;
    size_t n = len - i;
    if (n == 0 || n > EXT_MAX)
        return NULL;
    char ext[EXT_MAX + 1];
    for (size_t k = 0; k < n; k++) {
        char c = name[i + k];
        ext[k] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    ext[n] = '\0';
    const ext_type *e =
        bsearch(ext, table, sizeof table / sizeof table[0], sizeof table[0], cmp_ext);
    return e ? e->type : NULL;
}

int sf_mime_is_document(const char *type)
{
    return strcmp(type, "text/html") == 0 || strcmp(type, "application/xhtml+xml") == 0;
}
