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
    {"apk", "application/vnd.android.package-archive"},
    {"apng", "image/apng"},
    {"atom", "application/atom+xml"},
    {"avif", "image/avif"},
    {"bin", "application/octet-stream"},
    {"bmp", "image/bmp"},
    {"br", "application/x-brotli"},
    {"bz2", "application/x-bzip2"},
    {"cjs", "text/javascript"},
    {"crt", "application/x-x509-ca-cert"},
    {"css", "text/css"},
    {"csv", "text/csv"},
    {"der", "application/x-x509-ca-cert"},
    {"eml", "message/rfc822"},
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
    {"jar", "application/java-archive"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript"},
    {"json", "application/json"},
    {"jsonld", "application/ld+json"},
    {"jsx", "text/javascript"},
    {"jxl", "image/jxl"},
    {"kml", "application/vnd.google-earth.kml+xml"},
    {"kmz", "application/vnd.google-earth.kmz"},
    {"ktx2", "image/ktx2"},
    {"m3u8", "application/vnd.apple.mpegurl"},
    {"m4a", "audio/mp4"},
    {"m4s", "video/iso.segment"},
    {"m4v", "video/mp4"},
    {"map", "application/json"},
    {"markdown", "text/markdown"},
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
    {"pbm", "image/x-portable-bitmap"},
    {"pdf", "application/pdf"},
    {"pem", "application/x-x509-ca-cert"},
    {"pgm", "image/x-portable-graymap"},
    {"pkpass", "application/vnd.apple.pkpass"},
    {"png", "image/png"},
    {"pnm", "image/x-portable-anymap"},
    {"ppm", "image/x-portable-pixmap"},
    {"rss", "application/rss+xml"},
    {"rtf", "application/rtf"},
    {"srt", "application/x-subrip"},
    {"svg", "image/svg+xml"},
    {"svgz", "image/svg+xml"}, /* stored decompressed: see pk_svgz_key */
    {"tar", "application/x-tar"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"toml", "application/toml"},
    {"ts", "video/mp2t"}, /* MPEG-TS (HLS segments); servd-pack types TypeScript apart */
    {"tsv", "text/tab-separated-values"},
    {"ttc", "font/collection"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain"},
    {"usdz", "model/vnd.usdz+zip"},
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
    {"xslt", "application/xslt+xml"},
    {"xz", "application/x-xz"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"zip", "application/zip"},
    {"zst", "application/zstd"},
};

/* Extensions of files a site holds that have no web type of their own in
 * the table (libmagic names them, or they are not served at all): build
 * outputs, documents, archives, server scripts and backups. Sorted. */
static const char *const other_files[] = {
    "asp", "aspx", "avi", "bak", "basis", "bundle", "cgi",  "chunk",    "conf", "dat",  "data",
    "deb", "dll",  "dmg", "doc", "docx",  "env",    "exe",  "exr",      "flv",  "glsl", "hdr",
    "img", "ini",  "iso", "jsp", "ktx",   "log",    "mem",  "mkv",      "mpg",  "msi",  "odt",
    "old", "orig", "pck", "php", "pl",    "ppt",    "pptx", "py",       "rar",  "rb",   "rpm",
    "sh",  "sql",  "swf", "swp", "tgz",   "tmp",    "tsx",  "unityweb", "wgsl", "xls",  "xlsx",
};

static int cmp_ext(const void *k, const void *e)
{
    return strcmp(k, ((const ext_type *)e)->ext);
}

static int cmp_name(const void *k, const void *e)
{
    return strcmp(k, *(const char *const *)e);
}

/* Where the extension of name's last segment starts (after its last
 * dot), or 0 when it has none: no dot, or a name that is only ".ext". */
static size_t extension_at(const char *name, size_t len)
{
    size_t i = len;
    while (i > 0 && name[i - 1] != '.' && name[i - 1] != '/')
        i--;
    if (i == 0 || name[i - 1] != '.' || i < 2 || name[i - 2] == '/')
        return 0;
    return i;
}

int sf_ext_present(const char *name, size_t len)
{
    size_t i = extension_at(name, len);
    return i != 0 && i < len;
}

/* The extension of name's last segment, lowercased into ext (EXT_MAX + 1
 * bytes). @return 0, or -1: none (see extension_at, and an empty one), or
 * longer than any the tables know. */
static int extension(const char *name, size_t len, char ext[EXT_MAX + 1])
{
    size_t i = extension_at(name, len);
    if (i == 0)
        return -1;
    size_t n = len - i;
    if (n == 0 || n > EXT_MAX)
        return -1;
    for (size_t k = 0; k < n; k++) {
        char c = name[i + k];
        ext[k] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
    }
    ext[n] = '\0';
    return 0;
}

/* The type the table gives extension ext, or NULL. */
static const char *type_of(const char *ext)
{
    const ext_type *e =
        bsearch(ext, table, sizeof table / sizeof table[0], sizeof table[0], cmp_ext);
    return e ? e->type : NULL;
}

const char *sf_mime_by_ext(const char *name, size_t len)
{
    char ext[EXT_MAX + 1];
    return extension(name, len, ext) == 0 ? type_of(ext) : NULL;
}

int sf_ext_names_file(const char *name, size_t len)
{
    char ext[EXT_MAX + 1];
    if (extension(name, len, ext) != 0)
        return 0;
    const char *type = type_of(ext);
    if (type)
        return !sf_mime_is_document(type);
    return bsearch(ext, other_files, sizeof other_files / sizeof other_files[0],
                   sizeof other_files[0], cmp_name) != NULL;
}

int sf_mime_is_document(const char *type)
{
    return strcmp(type, "text/html") == 0 || strcmp(type, "application/xhtml+xml") == 0;
}
