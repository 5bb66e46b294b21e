//! One value typed on the command line (`--fill -inf`), read as a tensor
//! of a given dtype: exact, or refused — never wrapped or rounded into
//! another value's range.

use gatherscatter::{bf16, f16, DType, Tensor};

/// `text` as a one-element tensor of `dtype`, or why it is not one.
pub fn parse(text: &str, dtype: DType) -> Result<Tensor, String> {
    fn int<T>(text: &str, dtype: DType) -> Result<Tensor, String>
    where
        T: gatherscatter::Element + TryFrom<i128>,
    {
        let wide: i128 = text
            .parse()
            .map_err(|_| format!("not an integer, which {dtype} needs"))?;
        T::try_from(wide)
            .map(Tensor::scalar)
            .map_err(|_| format!("out of the range of {dtype}"))
    }
    let float = || -> Result<f64, String> {
        text.parse::<f64>()
            .map_err(|_| format!("not a number, which {dtype} needs"))
    };
    match dtype {
        DType::Bool => match text {
            "true" | "1" => Ok(Tensor::scalar(true)),
            "false" | "0" => Ok(Tensor::scalar(false)),
            _ => Err("not true, false, 1 or 0, which bool needs".into()),
        },
        DType::I8 => int::<i8>(text, dtype),
        DType::I16 => int::<i16>(text, dtype),
        DType::I32 => int::<i32>(text, dtype),
        DType::I64 => int::<i64>(text, dtype),
        DType::U8 => int::<u8>(text, dtype),
        DType::U16 => int::<u16>(text, dtype),
        DType::U32 => int::<u32>(text, dtype),
        DType::U64 => int::<u64>(text, dtype),
        DType::F16 => Ok(Tensor::scalar(f16::from_f64(float()?))),
        DType::BF16 => Ok(Tensor::scalar(bf16::from_f64(float()?))),
        DType::F32 => Ok(Tensor::scalar(float()? as f32)),
        DType::F64 => Ok(Tensor::scalar(float()?)),
        DType::String => Ok(Tensor::scalar(text.to_string())),
        other => Err(format!(
            "a {other} value cannot be given on the command line"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_in_the_dtype_and_out_of_range_ones_are_refused() {
        let f = parse("-inf", DType::F32).unwrap();
        assert_eq!(f.data::<f32>().unwrap(), &[f32::NEG_INFINITY]);
        assert_eq!(
            parse("255", DType::U8).unwrap().data::<u8>().unwrap(),
            &[255]
        );
        assert_eq!(
            parse("256", DType::U8).unwrap_err(),
            "out of the range of uint8"
        );
        assert_eq!(
            parse("1.5", DType::I32).unwrap_err(),
            "not an integer, which int32 needs"
        );
        assert_eq!(
            parse("true", DType::Bool).unwrap().data::<bool>().unwrap(),
            &[true]
        );
        assert!(parse("1", DType::Complex64).is_err());
    }
}
