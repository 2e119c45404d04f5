//! Traffic generators for the lab: bulk, request/response, application-windowed.
