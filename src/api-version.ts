// The version of the shape of every document narwhal prints or saves (--format json|yaml output, the
// saved plan file). Its own module: the saved plan's zod schema shares it, and importing that schema
// only for this string built its zod objects in every command (12 ms of a status).
export const API_VERSION = "narwhal/v1";
