//! The OFW WinVerbs user/kernel ABI (`core/winverbs/wv_ioctl.h`), byte for byte.
#![no_std]
