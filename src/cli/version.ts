/** The version `alp --version` prints and the HTTP server reports. */
export const ALP_VERSION = '0.1.0';
