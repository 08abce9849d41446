/*  The OpenAPI description of the HTTP API, built into gridbroker from
    docs/openapi.json (served at /api/v1/openapi.json; http.h). */
    .section .rodata
    .global grid_openapi_json
    .type grid_openapi_json, @object
grid_openapi_json:
    .incbin "docs/openapi.json"
    .byte 0
    .size grid_openapi_json, . - grid_openapi_json
    .section .note.GNU-stack,"",@progbits
