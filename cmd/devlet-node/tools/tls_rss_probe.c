// tls_rss_probe: how much resident memory an HTTPS client costs with libcurl, bare OpenSSL 3,
// GnuTLS and mbed TLS, to size a REST transport for devlet-node (dra-kubelet/README.md, "Idle
// RSS"). Not built by CMake: a measurement tool, run by hand against integration/apiserver's
// runner.
//
//   gcc -O2 -DWITH_CURL -o probe_curl tls_rss_probe.c -lssl -lcrypto -lcurl
//   gcc -O2 -o probe_ssl tls_rss_probe.c -lssl -lcrypto
//   gcc -O2 -o probe_ssl_static tls_rss_probe.c -Wl,--gc-sections
//       -Wl,-Bstatic -lssl -lcrypto -Wl,-Bdynamic -ldl -lpthread      (one line)
//   gcc -O2 -DWITH_GNUTLS -o probe_gnutls tls_rss_probe.c -lgnutls -lssl -lcrypto
//   gcc -O2 -DWITH_MBEDTLS -o probe_mbed tls_rss_probe.c -lmbedtls -lmbedx509 -lmbedcrypto
//       -lssl -lcrypto                                                 (one line)
//   apiserver-runner -- sh -c 'g() { grep -o "$1: .*" $2 | cut -d" " -f2 | base64 -d; }
//     g certificate-authority-data $DEVLET_TEST_KUBECONFIG > /tmp/ca.crt
//     g client-certificate-data $DEVLET_TEST_KUBECONFIG_CERT > /tmp/client.crt
//     g client-key-data $DEVLET_TEST_KUBECONFIG_CERT > /tmp/client.key
//     export CA=/tmp/ca.crt URL=$DEVLET_TEST_APISERVER
//     TOKEN=devlet-test-token SMAPS=/tmp/smaps-curl ./probe_curl curl; TOKEN=... ./probe_ssl ssl
//     CERT=/tmp/client.crt KEY=/tmp/client.key SMAPS=/tmp/smaps-mbed ./probe_mbed mbedtls; ...'
//
// Each mode makes three GETs of /api/v1/nodes (a new connection each; the GnuTLS and mbed TLS
// modes read the whole response and authenticate with $TOKEN or, without it, the client
// certificate $CERT/$KEY, all PEM handed over from memory), prints VmRSS at each step and copies
// /proc/self/smaps to $SMAPS if set. Every mode links OpenSSL, as devlet-node does through gRPC.
#define _GNU_SOURCE
#include <arpa/inet.h>
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
#ifdef WITH_GNUTLS
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#endif
#ifdef WITH_MBEDTLS
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
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

// Reads a whole file into a NUL-terminated malloc'ed buffer (the CA, certificate and key are
// handed to the TLS libraries from memory, as a kubeconfig's *-data fields are). NULL on error.
__attribute__((unused)) static char* ReadAll(const char* path, size_t* size) {
  FILE* f = path == NULL ? NULL : fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 4096, n = 0;
  char* buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n - 1 == 0) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  buf[n] = '\0';
  *size = n;
  return buf;
}

// The host and port of an https:// URL; 0 on a URL it cannot read.
__attribute__((unused)) static int HostPort(const char* url, char* host, char* port) {
  strcpy(port, "443");
  return sscanf(url, "https://%255[^:/]:%15[0-9]", host, port) >= 1;
}

__attribute__((unused)) static int Connect(const char* host, const char* port) {
  struct addrinfo* ai = NULL;
  if (getaddrinfo(host, port, NULL, &ai) != 0) return -1;
  const int fd = socket(ai->ai_family, SOCK_STREAM, 0);
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    close(fd);
    freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  return fd;
}

// The request each TLS mode sends: a bearer token if $TOKEN is set (else the client certificate
// authenticates).
__attribute__((unused)) static int Request(char* out, size_t size, const char* host,
                                           const char* token) {
  char auth[600] = "";
  if (token != NULL) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
  return snprintf(out, size,
                  "GET /api/v1/nodes HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n", host,
                  auth);
}

#ifdef WITH_GNUTLS
static int WithGnuTls(const char* url, const char* ca, const char* cert, const char* key,
                      const char* token) {
  if (gnutls_global_init() < 0) return 1;
  PrintRss("gnutls_global_init");
  gnutls_certificate_credentials_t cred;
  gnutls_certificate_allocate_credentials(&cred);
  size_t n = 0;
  char* pem = ReadAll(ca, &n);
  gnutls_datum_t d = {(unsigned char*)pem, (unsigned)n};
  if (pem == NULL || gnutls_certificate_set_x509_trust_mem(cred, &d, GNUTLS_X509_FMT_PEM) < 1) {
    return 1;
  }
  free(pem);
  if (cert != NULL && key != NULL) {
    size_t cn = 0, kn = 0;
    char* c = ReadAll(cert, &cn);
    char* k = ReadAll(key, &kn);
    gnutls_datum_t cd = {(unsigned char*)c, (unsigned)cn}, kd = {(unsigned char*)k, (unsigned)kn};
    const int rc = gnutls_certificate_set_x509_key_mem(cred, &cd, &kd, GNUTLS_X509_FMT_PEM);
    free(c);
    free(k);
    if (rc < 0) {
      fprintf(stderr, "gnutls key: %s\n", gnutls_strerror(rc));
      return 1;
    }
  }
  PrintRss("gnutls credentials");
  char host[256], port[16];
  if (!HostPort(url, host, port)) return 1;
  for (int i = 0; i < 3; i++) {
    const int fd = Connect(host, port);
    if (fd < 0) return 1;
    gnutls_session_t s;
    gnutls_init(&s, GNUTLS_CLIENT);
    gnutls_set_default_priority(s);
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
    gnutls_session_set_verify_cert(s, host, 0);
    gnutls_transport_set_int(s, fd);
    int rc;
    do rc = gnutls_handshake(s);
    while (rc < 0 && gnutls_error_is_fatal(rc) == 0);
    if (rc < 0) {
      fprintf(stderr, "gnutls handshake: %s\n", gnutls_strerror(rc));
      return 1;
    }
    char request[1024];
    const int len = Request(request, sizeof request, host, token);
    gnutls_record_send(s, request, (size_t)len);
    char response[4096];  // the whole response, until the server closes
    ssize_t got, total = 0, first = 0;
    while ((got = gnutls_record_recv(s, response + first, sizeof response - 1 - first)) != 0) {
      if (got < 0 && gnutls_error_is_fatal((int)got) != 0) break;
      if (got > 0 && first == 0) first = got > 20 ? 20 : got;
      if (got > 0) total += got;
    }
    response[first] = '\0';
    printf("gnutls: %zd bytes\n", total);
    char* version = gnutls_session_get_desc(s);
    printf("gnutls: %.15s (%s)\n", response, version);
    gnutls_free(version);
    gnutls_bye(s, GNUTLS_SHUT_WR);
    gnutls_deinit(s);
    close(fd);
  }
  return 0;
}
#endif

#ifdef WITH_MBEDTLS
static int MbedFail(const char* what, int rc) {
  char text[200];
  mbedtls_strerror(rc, text, sizeof text);
  fprintf(stderr, "mbedtls %s: %s\n", what, text);
  return 1;
}

static int WithMbedTls(const char* url, const char* ca, const char* cert, const char* key,
                       const char* token) {
  mbedtls_entropy_context entropy;
  mbedtls_ctr_drbg_context drbg;
  mbedtls_x509_crt ca_chain, own;
  mbedtls_pk_context pk;
  mbedtls_ssl_config conf;
  mbedtls_entropy_init(&entropy);
  mbedtls_ctr_drbg_init(&drbg);
  mbedtls_x509_crt_init(&ca_chain);
  mbedtls_x509_crt_init(&own);
  mbedtls_pk_init(&pk);
  mbedtls_ssl_config_init(&conf);
  int rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, NULL, 0);
  if (rc != 0) return MbedFail("seed", rc);
  size_t n = 0;
  char* pem = ReadAll(ca, &n);  // PEM parsing wants the terminating NUL counted
  if (pem == NULL) return 1;
  if ((rc = mbedtls_x509_crt_parse(&ca_chain, (unsigned char*)pem, n + 1)) != 0) {
    return MbedFail("ca", rc);
  }
  free(pem);
  mbedtls_ssl_config_defaults(&conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                              MBEDTLS_SSL_PRESET_DEFAULT);
  mbedtls_ssl_conf_rng(&conf, mbedtls_ctr_drbg_random, &drbg);
  mbedtls_ssl_conf_ca_chain(&conf, &ca_chain, NULL);
  mbedtls_ssl_conf_authmode(&conf, MBEDTLS_SSL_VERIFY_REQUIRED);
  if (cert != NULL && key != NULL) {
    size_t cn = 0, kn = 0;
    char* c = ReadAll(cert, &cn);
    char* k = ReadAll(key, &kn);
    if ((rc = mbedtls_x509_crt_parse(&own, (unsigned char*)c, cn + 1)) != 0) {
      return MbedFail("cert", rc);
    }
    if ((rc = mbedtls_pk_parse_key(&pk, (unsigned char*)k, kn + 1, NULL, 0)) != 0) {
      return MbedFail("key", rc);
    }
    free(c);
    free(k);
    if ((rc = mbedtls_ssl_conf_own_cert(&conf, &own, &pk)) != 0) return MbedFail("own", rc);
  }
  PrintRss("mbedtls config");
  char host[256], port[16];
  if (!HostPort(url, host, port)) return 1;
  for (int i = 0; i < 3; i++) {
    mbedtls_net_context net;
    mbedtls_net_init(&net);
    net.fd = Connect(host, port);
    if (net.fd < 0) return 1;
    mbedtls_ssl_context ssl;
    mbedtls_ssl_init(&ssl);
    mbedtls_ssl_setup(&ssl, &conf);
    // mbed TLS 2.28 matches the name against DNS names and the CN only, never an IP address
    // SAN; an address is checked after the handshake against the iPAddress SANs ([7], 0x87).
    struct in_addr ip4;
    const int is_ip = inet_pton(AF_INET, host, &ip4) == 1;
    mbedtls_ssl_set_hostname(&ssl, is_ip ? NULL : host);
    mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, mbedtls_net_recv, NULL);
    while ((rc = mbedtls_ssl_handshake(&ssl)) != 0) {
      if (rc != MBEDTLS_ERR_SSL_WANT_READ && rc != MBEDTLS_ERR_SSL_WANT_WRITE) {
        char flags[512];
        mbedtls_x509_crt_verify_info(flags, sizeof flags, "  ",
                                     mbedtls_ssl_get_verify_result(&ssl));
        fprintf(stderr, "%s", flags);
        return MbedFail("handshake", rc);
      }
    }
    if (is_ip) {
      const mbedtls_x509_crt* peer = mbedtls_ssl_get_peer_cert(&ssl);
      int match = 0;
      for (const mbedtls_x509_sequence* san = &peer->subject_alt_names; san != NULL;
           san = san->next) {
        match |= san->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && san->buf.len == 4 &&
                 memcmp(san->buf.p, &ip4, 4) == 0;
      }
      if (!match) return MbedFail("ip san", 0);
    }
    char request[1024];
    const int len = Request(request, sizeof request, host, token);
    mbedtls_ssl_write(&ssl, (unsigned char*)request, (size_t)len);
    char response[4096];  // the whole response, until the server closes
    int got, first = 0;
    long total = 0;
    while ((got = mbedtls_ssl_read(&ssl, (unsigned char*)response + first,
                                   sizeof response - 1 - first)) != 0) {
      if (got < 0 && got != MBEDTLS_ERR_SSL_WANT_READ) break;
      if (got > 0 && first == 0) first = got > 20 ? 20 : got;
      if (got > 0) total += got;
    }
    response[first] = '\0';
    printf("mbedtls: %ld bytes\n", total);
    printf("mbedtls: %.15s (%s %s)\n", response, mbedtls_ssl_get_version(&ssl),
           mbedtls_ssl_get_ciphersuite(&ssl));
    mbedtls_ssl_close_notify(&ssl);
    mbedtls_ssl_free(&ssl);
    mbedtls_net_free(&net);
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
  const char* cert = getenv("CERT");
  const char* key = getenv("KEY");
  (void)key;
  if (argc < 2 || url == NULL || ca == NULL || (token == NULL && cert == NULL)) {
    fprintf(stderr,
            "usage: URL=https://host:port CA=file TOKEN=t|CERT=pem KEY=pem %s "
            "curl|ssl [noconf]|gnutls|mbedtls\n",
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
#ifdef WITH_GNUTLS
  if (strcmp(argv[1], "gnutls") == 0) rc = WithGnuTls(url, ca, cert, key, token);
#endif
#ifdef WITH_MBEDTLS
  if (strcmp(argv[1], "mbedtls") == 0) rc = WithMbedTls(url, ca, cert, key, token);
#endif
  PrintRss("requests");
  CopySmaps();
  return rc;
}
