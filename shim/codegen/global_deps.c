/* Intentionally empty: this library exists for its link-time dependencies (OpenBLAS),
 * which torch/__init__.py loads with RTLD_GLOBAL through ctypes. */
