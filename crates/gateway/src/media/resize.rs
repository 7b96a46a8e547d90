//! Pictures made to fit what a model takes: a picture with a side, a pixel
//! count or a size over the provider's limits is scaled down (aspect ratio
//! kept) and encoded again, JPEG for photos, PNG where there is
//! transparency. A picture within the limits is passed on byte for byte.

use std::io::Cursor;

use image::{DynamicImage, ImageFormat, ImageReader, Limits};

/// What one provider takes per image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    /// Longest side, in pixels.
    pub max_side: u32,
    /// Most pixels (width × height).
    pub max_pixels: u64,
    /// Most bytes of the encoded image.
    pub max_bytes: usize,
}

impl ImageLimits {
    /// Anthropic: images over 8000 px a side are refused and those over
    /// 1568 px on the long side or ~1.15 megapixels are scaled down by the
    /// API anyway (so sending more only costs upload time); 5 MB per image.
    pub const ANTHROPIC: ImageLimits =
        ImageLimits { max_side: 1568, max_pixels: 1_150_000, max_bytes: 5 * 1024 * 1024 };
    /// OpenAI: high-detail images are fitted in 2048 × 2048 and then to 768 px
    /// on the short side; 20 MB per image.
    pub const OPENAI: ImageLimits =
        ImageLimits { max_side: 2048, max_pixels: 2048 * 768, max_bytes: 20 * 1024 * 1024 };

    /// The limits for a model named `provider/model`: OpenAI's for `openai`,
    /// else Anthropic's (the strictest of the common ones, safe for the rest).
    pub fn for_model(spec: &str) -> ImageLimits {
        match spec.split('/').next() {
            Some("openai") => Self::OPENAI,
            _ => Self::ANTHROPIC,
        }
    }
}

/// The largest picture decoded at all (a side), so that a small file that
/// claims to be enormous (a decompression bomb) is refused unread.
const MAX_DECODED_SIDE: u32 = 16_384;
/// Memory the decoder may use for one picture.
const MAX_DECODE_BYTES: u64 = 512 * 1024 * 1024;
/// JPEG quality of a scaled picture: no visible loss for a model.
const JPEG_QUALITY: u8 = 85;

/// Why a picture could not be made to fit.
#[derive(Debug, thiserror::Error)]
pub enum ResizeError {
    #[error("the picture cannot be read: {0}")]
    Unreadable(String),
    #[error("the picture cannot be made smaller than {0} bytes")]
    TooBig(usize),
}

/// `bytes` (PNG, JPEG, GIF or WebP) fitted to `limits`: `None` when they
/// already fit (send them as they are), else the new picture and its type.
pub fn fit(
    bytes: &[u8],
    limits: ImageLimits,
) -> Result<Option<(Vec<u8>, &'static str)>, ResizeError> {
    let unreadable = |e: &dyn std::fmt::Display| ResizeError::Unreadable(e.to_string());
    let reader = || {
        let mut reader = ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .map_err(|e| unreadable(&e))?;
        let mut decode_limits = Limits::default();
        decode_limits.max_image_width = Some(MAX_DECODED_SIDE);
        decode_limits.max_image_height = Some(MAX_DECODED_SIDE);
        decode_limits.max_alloc = Some(MAX_DECODE_BYTES);
        reader.limits(decode_limits);
        Ok::<_, ResizeError>(reader)
    };
    let (width, height) = reader()?.into_dimensions().map_err(|e| unreadable(&e))?;
    let (w, h) = target_size(width, height, limits);
    if (w, h) == (width, height) && bytes.len() <= limits.max_bytes {
        return Ok(None);
    }
    let picture = reader()?.decode().map_err(|e| unreadable(&e))?;
    let mut size = (w, h);
    // Scaled to the limits, the picture almost always fits in bytes too;
    // when not (noise, huge PNGs), it is made smaller until it does.
    for _ in 0..6 {
        let scaled = picture.resize_exact(size.0, size.1, image::imageops::FilterType::Triangle);
        let (encoded, media_type) = encode(&scaled).map_err(|e| unreadable(&e))?;
        if encoded.len() <= limits.max_bytes {
            return Ok(Some((encoded, media_type)));
        }
        size = ((size.0 * 3 / 4).max(1), (size.1 * 3 / 4).max(1));
    }
    Err(ResizeError::TooBig(limits.max_bytes))
}

/// The largest size within `limits` with the picture's aspect ratio.
fn target_size(width: u32, height: u32, limits: ImageLimits) -> (u32, u32) {
    let (w, h) = (f64::from(width.max(1)), f64::from(height.max(1)));
    let by_side = f64::from(limits.max_side) / w.max(h);
    let by_pixels = (limits.max_pixels as f64 / (w * h)).sqrt();
    let scale = by_side.min(by_pixels);
    if scale >= 1.0 {
        return (width, height);
    }
    (((w * scale).floor() as u32).max(1), ((h * scale).floor() as u32).max(1))
}

/// JPEG, or PNG for a picture with transparency.
fn encode(picture: &DynamicImage) -> Result<(Vec<u8>, &'static str), image::ImageError> {
    let mut out = Cursor::new(Vec::new());
    if picture.color().has_alpha() {
        picture.write_to(&mut out, ImageFormat::Png)?;
        return Ok((out.into_inner(), "image/png"));
    }
    let rgb = picture.to_rgb8();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, JPEG_QUALITY)
        .encode_image(&rgb)?;
    Ok((out.into_inner(), "image/jpeg"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::{Rgb, RgbImage, Rgba, RgbaImage};

    fn png(picture: DynamicImage) -> Vec<u8> {
        let mut out = Cursor::new(Vec::new());
        picture.write_to(&mut out, ImageFormat::Png).unwrap();
        out.into_inner()
    }

    fn gradient(width: u32, height: u32) -> DynamicImage {
        DynamicImage::ImageRgb8(RgbImage::from_fn(width, height, |x, y| {
            Rgb([(x % 256) as u8, (y % 256) as u8, ((x + y) % 256) as u8])
        }))
    }

    fn dimensions(bytes: &[u8]) -> (u32, u32) {
        ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .unwrap()
            .into_dimensions()
            .unwrap()
    }

    /// PNG's chunk checksum (CRC-32, IEEE).
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for byte in data {
            crc ^= u32::from(*byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }

    const SMALL: ImageLimits = ImageLimits { max_side: 100, max_pixels: 6_000, max_bytes: 50_000 };

    #[test]
    fn a_picture_within_the_limits_is_passed_on_byte_for_byte() {
        let bytes = png(gradient(60, 40));
        assert!(fit(&bytes, SMALL).unwrap().is_none());
        assert!(fit(&bytes, ImageLimits::ANTHROPIC).unwrap().is_none());
    }

    #[test]
    fn a_wide_photo_is_scaled_to_the_longest_side_keeping_its_shape_as_jpeg() {
        let limits = ImageLimits { max_pixels: u64::MAX, ..SMALL };
        let (bytes, media_type) = fit(&png(gradient(400, 100)), limits).unwrap().unwrap();
        assert_eq!(media_type, "image/jpeg");
        assert_eq!(ferroclaw_tools::image_media_type(&bytes[..16]), Some("image/jpeg"));
        assert_eq!(dimensions(&bytes), (100, 25));
    }

    #[test]
    fn a_tall_picture_is_held_to_the_pixel_count_and_transparency_stays_png() {
        let clear = RgbaImage::from_fn(100, 400, |x, _| Rgba([0, 0, 0, (x % 256) as u8]));
        let bytes = png(DynamicImage::ImageRgba8(clear));
        let limits = ImageLimits { max_side: 1000, max_pixels: 2_500, max_bytes: 50_000 };
        let (out, media_type) = fit(&bytes, limits).unwrap().unwrap();
        assert_eq!(media_type, "image/png");
        let (w, h) = dimensions(&out);
        assert_eq!((w, h), (25, 100));
        assert!(u64::from(w * h) <= limits.max_pixels);
    }

    #[test]
    fn a_picture_over_the_byte_limit_is_made_smaller_until_it_fits() {
        // Noise does not compress: 90 × 90 as PNG is ~24 KB.
        let noise = RgbImage::from_fn(90, 90, |_, _| {
            Rgb([fastrand::u8(..), fastrand::u8(..), fastrand::u8(..)])
        });
        let bytes = png(DynamicImage::ImageRgb8(noise));
        let limits = ImageLimits { max_bytes: 8_000, ..SMALL };
        assert!(bytes.len() > limits.max_bytes);
        let (out, _) = fit(&bytes, limits).unwrap().unwrap();
        assert!(out.len() <= limits.max_bytes, "{}", out.len());
    }

    #[test]
    fn a_picture_claiming_to_be_enormous_is_refused_unread() {
        // A PNG header that says 100000 × 100000, with nothing behind it.
        let mut bytes = png(gradient(2, 2));
        bytes[16..20].copy_from_slice(&100_000u32.to_be_bytes());
        bytes[20..24].copy_from_slice(&100_000u32.to_be_bytes());
        let crc = crc32(&bytes[12..29]);
        bytes[29..33].copy_from_slice(&crc.to_be_bytes());
        let err = fit(&bytes, SMALL).unwrap_err().to_string();
        assert!(err.contains("limit"), "{err}");
        assert!(fit(b"\x89PNG\r\n\x1a\nbroken", SMALL).is_err());
    }

    #[test]
    fn each_provider_gets_its_own_limits() {
        assert_eq!(ImageLimits::for_model("openai/gpt-5"), ImageLimits::OPENAI);
        assert_eq!(ImageLimits::for_model("anthropic/claude-sonnet-4-5"), ImageLimits::ANTHROPIC);
        assert_eq!(target_size(8000, 4000, ImageLimits::ANTHROPIC), (1516, 758));
    }
}
