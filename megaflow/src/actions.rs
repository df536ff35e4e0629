//! Datapath actions (placeholder, being written).
use std::sync::Arc;
use crate::types::PortNo;
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DpAction { Output(PortNo), Drop }
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actions(Arc<[DpAction]>);
impl Actions { pub fn new(a: Vec<DpAction>) -> Self { Actions(a.into()) } pub fn as_slice(&self) -> &[DpAction] { &self.0 } }
