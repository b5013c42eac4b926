// tls_rss_probe: how much resident memory an HTTPS client costs with libcurl and with bare
// OpenSSL 3, to size a REST transport for devlet-node (dra-kubelet/README.md, "Idle RSS").
// Not built by CMake: a measurement tool, run by hand against integration/apiserver's runner.
//
//   gcc -O2 -DWITH_CURL -o probe_curl tls_rss_probe.c -lssl -lcrypto -lcurl
//   gcc -O2 -o probe_ssl tls_rss_probe.c -lssl -lcrypto
//   gcc -O2 -o probe_ssl_static tls_rss_probe.c -Wl,--gc-sections
//       -Wl,-Bstatic -lssl -lcrypto -Wl,-Bdynamic -ldl -lpthread      (one line)
//   apiserver-runner -- sh -c 'grep -o "certificate-authority-data: .*" $DEVLET_TEST_KUBECONFIG |
//     cut -d" " -f2 | base64 -d > /tmp/ca.crt; export CA=/tmp/ca.crt TOKEN=devlet-test-token
//     URL=$DEVLET_TEST_APISERVER; SMAPS=/tmp/smaps-curl ./probe_curl curl; ./probe_ssl ssl;
//     ./probe_ssl ssl noconf; ./probe_ssl_static ssl'
//
// Each mode makes three GETs of /api/v1/nodes (a new connection each), prints VmRSS at each step
// and copies /proc/self/smaps to $SMAPS if set.
#define _GNU_SOURCE
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#ifdef WITH_CURL
#include <curl/curl.h>
#endif

static void PrintRss(const char* step) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) printf("%s after %s", step, line + 6);
  }
  if (f != NULL) fclose(f);
}

static void CopySmaps(void) {
  const char* out = getenv("SMAPS");
  if (out == NULL) return;
  FILE* in = fopen("/proc/self/smaps", "r");
  FILE* o = fopen(out, "w");
  char buf[4096];
  size_t n;
  while (in != NULL && o != NULL && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, o);
  if (in != NULL) fclose(in);
  if (o != NULL) fclose(o);
}

#ifdef WITH_CURL
static size_t Discard(char* data, size_t size, size_t count, void* user) {
  (void)data;
  (void)user;
  return size * count;
}

static int WithCurl(const char* url, const char* ca, const char* token) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  PrintRss("curl_global_init");
  CURL* curl = curl_easy_init();
  char auth[512];
  snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
  struct curl_slist* headers = curl_slist_append(NULL, auth);
  char full[512];
  snprintf(full, sizeof full, "%s/api/v1/nodes", url);
  for (int i = 0; i < 3; i++) {
    curl_easy_setopt(curl, CURLOPT_URL, full);
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
    curl_easy_setopt(curl, CURLOPT_FORBID_REUSE, 1L);
    const CURLcode rc = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    printf("curl rc=%d HTTP %ld\n", (int)rc, code);
    if (rc != CURLE_OK) return 1;
  }
  return 0;
}
#endif

static int WithOpenSsl(const char* url, const char* ca, const char* token, int no_config) {
  OPENSSL_init_ssl(no_config ? OPENSSL_INIT_NO_LOAD_CONFIG : 0, NULL);
  PrintRss("OPENSSL_init_ssl");
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) return 1;
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  PrintRss("SSL_CTX_new");
  char host[256] = "";
  char port[16] = "443";
  if (sscanf(url, "https://%255[^:/]:%15[0-9]", host, port) < 1) return 1;
  for (int i = 0; i < 3; i++) {
    struct addrinfo* ai = NULL;
    if (getaddrinfo(host, port, NULL, &ai) != 0) return 1;
    const int fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) return 1;
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    SSL_set1_host(ssl, host);
    if (SSL_connect(ssl) != 1) {
      ERR_print_errors_fp(stderr);
      return 1;
    }
    char request[1024];
    snprintf(request, sizeof request,
             "GET /api/v1/nodes HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
             "Connection: close\r\n\r\n", host, token);
    SSL_write(ssl, request, (int)strlen(request));
    char response[64];
    const int n = SSL_read(ssl, response, sizeof response - 1);
    response[n > 0 ? n : 0] = '\0';
    printf("openssl: %.15s\n", response);
    SSL_shutdown(ssl);
    SSL_free(ssl);
    close(fd);
    freeaddrinfo(ai);
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* url = getenv("URL");
  const char* ca = getenv("CA");
  const char* token = getenv("TOKEN");
  if (argc < 2 || url == NULL || ca == NULL || token == NULL) {
    fprintf(stderr, "usage: URL=https://host:port CA=file TOKEN=t %s curl|ssl [noconf]\n",
            argv[0]);
    return 2;
  }
  PrintRss("start");
  int rc = 2;
#ifdef WITH_CURL
  if (strcmp(argv[1], "curl") == 0) rc = WithCurl(url, ca, token);
#endif
  if (strcmp(argv[1], "ssl") == 0) {
    rc = WithOpenSsl(url, ca, token, argc > 2 && strcmp(argv[2], "noconf") == 0);
  }
  PrintRss("requests");
  CopySmaps();
  return rc;
}
