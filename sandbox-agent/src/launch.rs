//! The local backend's namespace launcher. (Being implemented.)
