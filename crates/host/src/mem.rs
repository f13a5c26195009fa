//! Memory: transparent huge pages for a buffer the senders copy from.

/// Ask for transparent huge pages behind `block` (madvise MADV_HUGEPAGE),
/// before its first touch; `block` must start on a page boundary. False
/// where the kernel has no THP or refuses; the memory is usable either way.
pub fn advise_huge_pages(block: &mut [u8]) -> bool {
    // SAFETY: the range is exactly the slice's own memory, and
    // MADV_HUGEPAGE changes how it is backed, never its contents.
    unsafe { libc::madvise(block.as_mut_ptr() as *mut libc::c_void, block.len(), libc::MADV_HUGEPAGE) == 0 }
}
