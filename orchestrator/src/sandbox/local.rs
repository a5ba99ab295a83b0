//! The local backend. (Being implemented.)
